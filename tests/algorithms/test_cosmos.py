"""COSMOS end to end on digits, its protocol behaviour, and a cluster or a client that misses
a round's tasks."""

import copy

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cosmosfl import Client, Cosmos, SklearnLearner, TorchLearner, simulate
from cosmosfl.core import protocol
from cosmosfl.data import load_dataset, paper_split
from cosmosfl.engines.simulation import ClientRejectedError, ClientRejectedWarning
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.models import build_model

from .test_reliability import ALGORITHMS, _cosmos_engine

FAST = [
    "rounds=2",
    "clients.models={mlp: 1.0}",
    "algorithm.pretrain_epochs=10",
    "algorithm.local_epochs=1",
    "algorithm.server_epochs=2",
    "algorithm.distill_epochs=1",
]


@pytest.fixture(scope="module")
def digits_runs():
    cfg = load_config("configs/default.yaml", FAST)
    return [run_experiment(cfg, progress=False) for _ in range(2)], cfg


def test_clusters_recover_the_five_true_groups(digits_runs):
    (result, _), _ = digits_runs
    assert result.summary["K"] == 5
    truth = result.summary["true_groups"]
    found = result.summary["clusters"]
    # Same partition of clients (labels may be permuted).
    pairs = {(found[c], truth[c]) for c in truth}
    assert len(pairs) == 5 and len({f for f, _ in pairs}) == 5 and len({t for _, t in pairs}) == 5
    assert result.summary["recovers_groups_exactly"]


def test_same_seed_gives_identical_metrics(digits_runs):
    (a, b), _ = digits_runs
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in a.records]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in b.records]


def test_reports_every_evaluation_point_and_bytes(digits_runs):
    (result, _), _ = digits_runs
    rec = result.records[-1]
    assert set(rec["accuracy"]) == {"local", "cluster_model", "client_model"}
    assert rec["primary_model"] == "cluster_model"
    n_public = result.summary["public_size"]
    # Float32 soft labels: |U| x M x 4 bytes each way per client per round, measured.
    assert set(rec["bytes_up"].values()) == {n_public * 10 * 4}
    assert set(rec["bytes_down"].values()) == {n_public * 10 * 4}
    assert {"local_training", "server_distillation", "client_distillation"} <= set(rec["seconds"])
    assert result.summary["final_round"]["mean_accuracy"]["cluster_model"] > 0.5


def test_different_seed_changes_results():
    cfg = load_config("configs/default.yaml", [*FAST, "rounds=1", "seed=2"])
    other = load_config("configs/default.yaml", [*FAST, "rounds=1", "seed=3"])
    a = run_experiment(cfg, progress=False).records[0]["accuracy"]
    b = run_experiment(other, progress=False).records[0]["accuracy"]
    assert a != b


class SpyFederation:
    """Wraps an engine to record every message and reply that crosses the boundary."""

    def __init__(self, engine):
        self.engine = engine
        self.traffic = []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def send(self, messages, expect=None):
        replies = self.engine.send(messages, expect)
        for m in messages.values():
            self.traffic.append(("down", m.task, dict(m.arrays)))
        for r in replies.values():
            self.traffic.append(("up", r.task, dict(r.arrays)))
        return replies


def small_federation(num_clients=10, seed=0, sklearn_ids=()):
    ds = load_dataset("digits")
    part = paper_split(ds.y_train, ds.y_test, num_clients, seed=seed)
    x = ds.x_train.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    xt = ds.x_test.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    clients = []
    for i in range(num_clients):
        tr, te = part.client_train[i], part.client_test[i]
        if i in sklearn_ids:
            from sklearn.linear_model import LogisticRegression

            learner = SklearnLearner(LogisticRegression(max_iter=300), num_classes=10)
        else:
            net = build_model("mlp", in_channels=1, num_classes=10, image_size=8, seed=i)
            learner = TorchLearner(net, seed=i, distill_lr=1e-3)
        clients.append(Client(i, learner, (x[tr], ds.y_train[tr]), (xt[te], ds.y_test[te])))
    return clients, x[part.public], part


def test_no_message_carries_model_parameters():
    from cosmosfl.engines import InProcessEngine
    from cosmosfl.experiment.server_models import provide_server_learner

    clients, public_x, _ = small_federation()
    engine = InProcessEngine(clients, public_x, seed=0)
    spy = SpyFederation(engine)
    algo = Cosmos(
        target_clusters=5,
        server_model="mlp",
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
        recluster=True,
    )
    provide_server_learner(algo, engine.device)
    for t in (1, 2):
        algo.run_round(spy, t)
    assert spy.traffic
    tasks = {task for _, task, _ in spy.traffic}
    assert not tasks & protocol.PARAMETER_TASKS
    n, m = public_x.shape[0], 10
    smallest_model = min(
        sum(p.numel() for p in c.learner.model.parameters())
        for c in clients
        if hasattr(c.learner, "model")
    )
    for direction, task, arrays in spy.traffic:
        for name, arr in arrays.items():
            # Only soft labels on U (or per-sample weights) ever travel.
            assert arr.shape in ((n, m), (n,)), (direction, task, name, arr.shape)
            assert arr.size < smallest_model


def test_sklearn_and_torch_clients_in_one_federation():
    clients, public_x, _ = small_federation(sklearn_ids=(3, 8))
    algo = Cosmos(
        target_clusters=5,
        server_model="mlp",
        pretrain_epochs=10,
        local_epochs=1,
        server_epochs=3,
        distill_epochs=1,
        server_lr=1e-3,
    )
    result = simulate(algo, clients, public_x, rounds=2, seed=0)
    acc = result.accuracy("cluster_model")
    assert set(acc) == set(range(10))
    client_acc = result.accuracy("client_model")
    for sk in (3, 8):
        assert client_acc[sk] > 0.5  # the scikit-learn clients learned and took part
    assert result.clusters is not None and set(result.clusters) == set(range(10))


def k_with_threshold(b0):
    clients, public_x, _ = small_federation()
    algo = Cosmos(
        b0=b0,
        server_model="mlp",
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    return simulate(algo, clients, public_x, rounds=1, seed=0).records[0]["K"]


def test_threshold_mode_makes_k_an_output():
    # B0 = 0: only identical pseudo-labels are neighbours -> every client alone.
    assert k_with_threshold(0.0) == 10
    # B0 = 2 is the largest mean l1 distance possible -> one cluster.
    assert k_with_threshold(2.0) == 1


@pytest.mark.parametrize("clustering", ["greedy", "average-linkage"])
def test_silhouette_rule_finds_the_class_groups_without_k(clustering):
    # Neither K nor B0 is given: K comes out of the labels and equals the 5 class groups.
    clients, public_x, part = small_federation()
    algo = Cosmos(
        clustering=clustering,
        b0_rule="silhouette",
        server_model="mlp",
        pretrain_epochs=2,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    record = simulate(algo, clients, public_x, rounds=1, seed=0).records[0]
    assert record["K"] == 5
    found = [record["clusters"][str(c)] for c in range(10)]
    assert adjusted_rand_score(part.client_group, found) == 1.0


def test_failed_client_is_excluded_not_fatal():
    clients, public_x, _ = small_federation()

    class Broken(TorchLearner):
        def predict_proba(self, x):
            p = super().predict_proba(x)
            p[0, 0] = np.nan
            return p

    bad = clients[4]
    bad.learner.__class__ = Broken
    algorithm = Cosmos(
        target_clusters=4,
        server_model="mlp",
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    # strict (the default) stops at the bad reply, naming the client and the reason ...
    with pytest.raises(ClientRejectedError, match="client 4's reply to task 'predict_public'"):
        simulate(copy.deepcopy(algorithm), copy.deepcopy(clients), public_x, rounds=1, seed=0)
    # ... strict=False leaves it out of the step with a warning, and the run goes on.
    with pytest.warns(ClientRejectedWarning, match="client 4's reply"):
        result = simulate(algorithm, clients, public_x, rounds=1, seed=0, strict=False)
    rec = result.records[0]
    assert [r["client"] for r in rec["rejected"]] == [4]
    assert "non-finite" in rec["rejected"][0]["reason"]
    assert "4" not in rec["clusters"]


def test_invalid_hyperparameters_are_clear():
    with pytest.raises(ValueError, match="exactly one of b0"):
        Cosmos(b0=0.5, target_clusters=5)
    with pytest.raises(ValueError, match="aggregation"):
        Cosmos(aggregation="mode")
    with pytest.raises(ValueError, match="lam"):
        Cosmos(lam=-1)
    with pytest.raises(ValueError, match="distance_backend 'gpu' is not supported"):
        Cosmos(distance_backend="gpu")


def test_numba_distance_backend_without_numba_names_the_install(monkeypatch):
    from cosmosfl.core import l1_kernel

    monkeypatch.setattr(l1_kernel, "available", lambda: False)
    with pytest.raises(ValueError, match=r"pip install 'cosmosfl\[fast\]'"):
        Cosmos(distance_backend="numba")
    Cosmos(distance_backend="auto")  # falls back to torch


def test_distillation_losses_are_recorded_per_cluster_and_client(digits_runs):
    (result, _), _ = digits_runs
    for rec in result.records:
        server, clients = rec["server_distill"], rec["client_distill"]
        assert set(server) == {str(k) for k in set(rec["clusters"].values())}
        assert set(clients) == set(rec["clusters"])
        for losses in server.values():
            assert {"kl_first", "kl_last", "consistency_first", "consistency_last"} <= set(losses)
            assert all(np.isfinite(v) and v >= 0 for v in losses.values())
    # Round 1's cluster models start from scratch: they fit their teachers over the epochs.
    first = result.records[0]["server_distill"]
    assert all(v["kl_last"] < v["kl_first"] for v in first.values())


def test_public_probe_separates_the_clusters_classes_from_the_rest(digits_runs):
    (result, _), _ = digits_runs
    probe = result.records[-1]["public_probe"]
    assert set(probe) == {str(k) for k in set(result.records[-1]["clusters"].values())}
    for stats in probe.values():
        # 5 groups of 2 classes: a cluster of one group covers a fifth of U.
        assert 0.1 < stats["share_in"] < 0.3
        # The cluster's clients know their own classes and can only guess the others.
        assert stats["teacher_in"] > 0.8 > 0.5 > stats["teacher_out"]
        assert stats["members_in"] > stats["members_out"]
        assert 0 <= stats["cluster_model_in"] <= 1


def test_clients_can_distill_from_the_teacher_instead_of_the_cluster_model():
    cfg = load_config("configs/default.yaml", [*FAST, "rounds=1"])
    base = run_experiment(cfg, progress=False).records[0]
    cfg = load_config(
        "configs/default.yaml", [*FAST, "rounds=1", "algorithm.client_targets=teacher"]
    )
    diag = run_experiment(cfg, progress=False).records[0]
    # Same clients, clusters and cluster models; only what the clients distill from differs.
    assert diag["clusters"] == base["clusters"]
    assert diag["accuracy"]["cluster_model"] == base["accuracy"]["cluster_model"]
    assert diag["accuracy"]["client_model"] != base["accuracy"]["client_model"]


def test_cosmos_builds_no_model_itself_and_says_where_a_factory_comes_from():
    from cosmosfl.engines import InProcessEngine

    clients, public_x, _ = small_federation()
    engine = InProcessEngine(clients, public_x, seed=0)
    algo = Cosmos(server_model="mlp", pretrain_epochs=0, target_clusters=1)
    with pytest.raises(ValueError, match=r"no server_learner.*simulate and run_experiment"):
        engine.run_round(algo, 1, 1)


def test_distillation_targets_are_encoded_once_per_cluster():
    # With a lossy codec the members of a cluster share one encoded copy of h_k(U) (N encoded
    # copies would grow with clients x |U|); each client still receives its cluster's targets.
    from cosmosfl.engines import InProcessEngine
    from cosmosfl.experiment.server_models import provide_server_learner

    clients, public_x, _ = small_federation()
    engine = InProcessEngine(clients, public_x, seed=0)
    sent = {}

    class Spy(SpyFederation):
        def send(self, messages, expect=None):
            if next(iter(messages.values())).task == protocol.DISTILL:
                sent.update(messages)
            return self.engine.send(messages, expect)

    algo = Cosmos(
        target_clusters=3,
        codec="uint8",
        server_model="mlp",
        pretrain_epochs=1,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    provide_server_learner(algo, engine.device)
    record = algo.run_round(Spy(engine), 1)
    assert set(sent) == set(engine.client_ids)
    by_cluster = {}
    for cid, message in sent.items():
        by_cluster.setdefault(algo.assignment[cid], []).append(message.arrays["targets.uint8"])
    assert len(by_cluster) == record.info["K"] == 3
    for arrays in by_cluster.values():
        assert all(a is arrays[0] for a in arrays)
    firsts = [arrays[0] for arrays in by_cluster.values()]
    assert len({id(a) for a in firsts}) == len(firsts)
    n = len(public_x)
    assert all(a.shape == (n, 10) and a.dtype == np.uint8 for a in firsts)


def test_cosmos_cluster_without_answers_keeps_its_model():
    # Clients 0 and 1 share a class group (paper split): both miss round 2's pseudo-labels.
    engine, _ = _cosmos_engine(
        lambda r, c, t: (
            "dropout" if r == 2 and c in (0, 1) and t == protocol.PREDICT_PUBLIC else None
        )
    )
    algo = ALGORITHMS["cosmos"]()
    with torch.random.fork_rng(devices=[]):
        first = engine.run_round(algo, 1, 2)
        k = first["clusters"]["0"]
        assert first["clusters"]["1"] == k
        before = algo.cluster_models[k].predict_proba(engine.public_x)
        second = engine.run_round(algo, 2, 2)
    assert k not in second["updated_clusters"]
    assert sorted(second["updated_clusters"]) == sorted(set(first["clusters"].values()) - {k})
    np.testing.assert_array_equal(algo.cluster_models[k].predict_proba(engine.public_x), before)
    assert set(second["accuracy"]["cluster_model"]) == {str(c) for c in range(10)}


def test_client_that_trained_nothing_is_not_marked_pretrained():
    # Client 3 misses only round 1's training; its pseudo-labels still arrive.
    engine, _ = _cosmos_engine(
        lambda r, c, t: "dropout" if r == 1 and c == 3 and t == protocol.TRAIN_LOCAL else None
    )
    algo = ALGORITHMS["cosmos"]()
    with torch.random.fork_rng(devices=[]):
        engine.run_round(algo, 1, 2)
    assert 3 not in algo.pretrained and 4 in algo.pretrained


@pytest.mark.parametrize("mode", ["random", "flip", "fixed"])
def test_chance_corrected_distances_leave_byzantine_clients_without_honest_mates(mode):
    # 20 % liars of each kind; K and B0 are not given. Labels that do not depend on the
    # sample (random, fixed) are at chance from everyone; flipped ones match no honest client
    # sample by sample: no liar shares a cluster with an honest client.
    clients, public_x, _ = small_federation()
    algo = Cosmos(
        clustering="average-linkage",
        b0_rule="silhouette",
        distance="l1-chance",
        server_model="mlp",
        pretrain_epochs=10,
        local_epochs=1,
        server_epochs=1,
        distill_epochs=1,
    )
    faults = {"byzantine": 0.2, "byzantine_mode": mode}
    record = simulate(algo, clients, public_x, rounds=1, seed=0, faults=faults).records[0]
    liars = set(record["byzantine"])
    assert len(liars) == 2
    clusters = {int(c): k for c, k in record["clusters"].items()}
    for liar in liars:
        mates = {c for c, k in clusters.items() if k == clusters[liar]} - {liar}
        assert mates <= liars, f"liar {liar} shares cluster {clusters[liar]} with {mates}"
