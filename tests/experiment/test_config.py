import pytest
import yaml

from cosmosfl.algorithms.cosmos import Cosmos
from cosmosfl.experiment.build import client_model_names
from cosmosfl.experiment.config import (
    ConfigError,
    apply_overrides,
    config_from_dict,
    dump_config,
    load_config,
)


def make_algorithm(section: dict) -> Cosmos:
    """The COSMOS a resolved `algorithm` section describes."""
    return Cosmos(**{k: v for k, v in section.items() if k != "name"})


def test_defaults_are_the_papers_but_the_clustering_and_the_recipe():
    cfg = config_from_dict({})
    alg = cfg.algorithm  # resolved: every setting present, defaults included
    assert alg["name"] == "cosmos" and alg["b0"] is None and alg["target_clusters"] is None
    # Settings as given: "auto" is resolved by the algorithm (tests/algorithms/test_cosmos.py).
    assert (alg["clustering"], alg["b0_rule"]) == ("average-linkage", "auto")
    assert (alg["lam"], alg["temperature"], alg["aggregation"], alg["distance"]) == (
        5.0,
        1.0,
        "mean",
        "l1",
    )
    assert (alg["pretrain_epochs"], alg["client_weights"]) == (5, "uniform")
    # The recipe since 0.4: validated (server_lr null: 1e-3 to start, cut by fidelity).
    assert (alg["recipe"], alg["server_training"], alg["client_gate"]) == (
        "validated",
        "auto",
        "auto",
    )
    assert alg["server_lr"] is None and cfg.data.validation_fraction == 0.1
    assert (cfg.clients.lr, cfg.clients.distill_lr, cfg.clients.batch_size) == (1e-3, 1e-4, 32)
    assert (cfg.data.alpha, cfg.data.public_fraction, cfg.data.mix_fraction) == (5.0, 0.2, 0.1)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"roundz": 3}, "unknown key.*roundz.*allowed"),
        ({"data": {"datset": "x"}}, r"data\.datset.*allowed in data"),
        ({"rounds": 0}, "rounds = 0"),
        ({"rounds": "ten"}, "rounds = 'ten' must be of type int"),
        ({"rounds": True}, "must be of type int"),
        ({"device": "tpu"}, "allowed: cpu, cuda, mps, auto"),
        ({"data": {"partition": "random"}}, "allowed: paper, dirichlet"),
        ({"clients": {"width": 0}}, "clients.width"),
        ({"clients": {"models": {"cnn": -1}}}, "positive fractions"),
        ({"clients": {"models": ["cnn"]}}, "exactly data.num_clients"),
        ({"algorithm": {"name": "fedsgd"}}, "allowed: .*cosmos.*local"),
        ({"algorithm": {"name": "cosmos", "lambda": 1}}, r"algorithm\.lambda.*allowed"),
        ({"algorithm": {"name": "cosmos", "lam": "high"}}, "algorithm.lam = 'high'"),
        ({"algorithm": {"name": "cosmos", "aggregation": "mode"}}, "aggregation 'mode'"),
        ({"algorithm": {"b0": 0.5, "target_clusters": 3}}, "exactly one of b0"),
        ({"algorithm": {"server_model": "vgg17"}}, "server_model 'vgg17'.*allowed"),
        ({"data": {"dataset": "cifar11"}}, "data.dataset = 'cifar11'.*cifar10"),
        ({"algorithm": {"name": "local", "lam": 1.0}}, "for local"),
        ({"algorithm": "cosmos"}, "mapping with a 'name'"),
        ({"algorithm": {"lam": -1.0}}, "lam"),  # the name defaults to cosmos
        ({"threads": 0}, "threads"),
        ({"clients": {"consistency_target": "stop"}}, "allowed: live, detached"),
        ({"clients": {"neighbour_bn": "off"}}, "allowed: update, frozen"),
        ({"algorithm": {"b0_rule": "elbow"}}, "b0_rule 'elbow'.*largest-gap"),
        (
            {"algorithm": {"b0_rule": "largest-gap", "target_clusters": 5}},
            "target_clusters=null",
        ),
        ({"algorithm": {"server_head_init": "xavier"}}, "server_head_init 'xavier'"),
        ({"algorithm": {"clustering": "kmeans"}}, "clustering 'kmeans'.*average-linkage"),
        (
            {"algorithm": {"b0_rule": "silhouette", "target_clusters": 5}},
            "target_clusters=null",
        ),
    ],
)
def test_bad_configs_are_rejected_with_field_and_allowed_values(raw, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


def test_ints_accepted_for_floats_and_overrides_parse_yaml():
    raw = apply_overrides(
        {},
        [
            "rounds=3",
            "algorithm.lam=1",
            "data.num_clients=20",
            "clients.models={cnn: 1}",
            "algorithm.name=cosmos",
        ],
    )
    cfg = config_from_dict(raw)
    assert (
        cfg.rounds == 3 and cfg.algorithm["lam"] == 1.0 and isinstance(cfg.algorithm["lam"], float)
    )
    assert cfg.data.num_clients == 20 and cfg.clients.models == {"cnn": 1.0}
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["rounds"])


def test_threshold_alone_makes_k_an_output():
    alg = config_from_dict({"algorithm": {"b0": 0.4}}).algorithm
    assert alg["b0"] == 0.4 and alg["target_clusters"] is None


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rounds: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_dumped_config_loads_back_identically(tmp_path):
    cfg = load_config("configs/default.yaml")
    path = tmp_path / "c.yaml"
    path.write_text(dump_config(cfg))
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    "name",
    [
        "default.yaml",
        "cifar10-cpu.yaml",
        "paper-cifar10.yaml",
        "paper-cifar100.yaml",
        "paper-emnist.yaml",
        "paper-tiny-imagenet.yaml",
        "fmnist-paper.yaml",
        "cifar10-paper.yaml",
        "cifar10-small-clients.yaml",
    ],
)
def test_shipped_configs_are_valid(repo_root, name):
    cfg = load_config(repo_root / "configs" / name)
    assert cfg.algorithm["name"] == "cosmos"
    if name.endswith("-paper.yaml"):  # the paper's shape: 25 clients, 5 per class group
        assert (cfg.data.num_clients, cfg.data.num_groups, cfg.data.public_fraction) == (
            25,
            5,
            0.2,
        )


def test_small_clients_config_is_the_paper_shape_with_mlp_clients_only(repo_root):
    # docs/ablations.md pairs its runs with runs of cifar10-paper.yaml made with this one
    # override; any other difference would break that pairing.
    small = load_config(repo_root / "configs" / "cifar10-small-clients.yaml")
    paper = load_config(repo_root / "configs" / "cifar10-paper.yaml", ["clients.models={mlp: 1.0}"])
    assert dump_config(small) == dump_config(paper)
    assert client_model_names(small.clients.models, 25) == ["mlp"] * 25


def test_a_client_mix_builds_the_same_clients_from_a_file_or_an_override(tmp_path):
    from_override = load_config(None, ["clients.models={mlp: 0.5, cnn: 0.3, random_forest: 0.2}"])
    path = tmp_path / "c.yaml"
    path.write_text(dump_config(from_override))
    from_file = load_config(path)  # as `cosmosfl run --resume` rebuilds a run
    assert list(from_file.clients.models) == list(from_override.clients.models)
    assert client_model_names(from_file.clients.models, 10) == client_model_names(
        from_override.clients.models, 10
    )


def test_the_papers_clustering_is_one_setting_away():
    alg = config_from_dict({"algorithm": {"clustering": "greedy"}}).algorithm
    assert (alg["clustering"], alg["b0_rule"], alg["target_clusters"]) == ("greedy", "auto", None)
    assert (make_algorithm(alg).b0_rule_used, make_algorithm(alg).target_clusters_used) == (
        "target",
        5,
    )
    # A K or B0 given with the default clustering cuts the dendrogram there.
    alg = config_from_dict({"algorithm": {"target_clusters": 3}}).algorithm
    assert (alg["clustering"], alg["target_clusters"]) == ("average-linkage", 3)
    assert make_algorithm(alg).b0_rule_used == "target"


def test_a_config_relying_on_a_changed_default_gets_a_notice_that_is_not_a_setting():
    relying = config_from_dict({"algorithm": {"name": "cosmos", "lam": 1.0}})
    assert len(relying.notices) == 2
    assert "algorithm.recipe: paper" in relying.notices[0]
    assert "algorithm.clustering: greedy" in relying.notices[1]
    assert "notices" not in relying.to_dict() and "notice" not in dump_config(relying)
    named = config_from_dict(
        {
            "algorithm": {
                "name": "cosmos",
                "lam": 1.0,
                "clustering": "average-linkage",
                "recipe": "validated",
            }
        }
    )
    assert named.notices == [] and named == relying  # same settings, only the notice differs
    # A run directory's config.yaml names every setting: reloading it says nothing.
    assert config_from_dict(yaml.safe_load(dump_config(relying))).notices == []
    assert config_from_dict({"algorithm": {"name": "local"}}).notices == []


@pytest.mark.parametrize("name", ["default", "paper-cifar10", "fmnist-paper", "cifar10-cpu"])
def test_configs_with_reported_figures_name_the_papers_clustering(repo_root, name):
    cfg = load_config(repo_root / "configs" / f"{name}.yaml")
    assert cfg.notices == []
    assert (cfg.algorithm["clustering"], cfg.algorithm["target_clusters"]) == ("greedy", 5)
    # ... and the paper's recipe, without a validation slice, as when they were measured.
    assert cfg.algorithm["recipe"] == "paper" and cfg.data.validation_fraction == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"rounds": 0}, r"^rounds = 0 is not allowed; use an integer >= 1$"),
        ({"min_participation": 1.5}, r"^min_participation = 1\.5 is not allowed; use a fraction"),
        ({"workers": "many"}, r"^workers = 'many' is not allowed; use auto"),
        ({"data": {"num_clients": 0}}, r"^data\.num_clients = 0 is not allowed; use an integer"),
        ({"data": {"missing": "drop"}}, r"^data\.missing = 'drop' is not allowed; allowed: refuse"),
        ({"data": {"dataset": " "}}, r"^data\.dataset = ' ' is not allowed; allowed: "),
        ({"data": {"image_size": 4}}, r"^data\.image_size = 4 is not allowed; use an integer in"),
        ({"tracking": {"experiment": ""}}, r"^tracking\.experiment = '' is not allowed; use a non"),
        (
            {"tracking": {"mlflow": " "}},
            r"^tracking\.mlflow = ' ' is not allowed; use a path or null",
        ),
        ({"clients": {"lr": -1}}, r"^clients\.lr = -1\.0 is not allowed; use a number > 0$"),
        (
            {"clients": {"batch_size": 0}},
            r"^clients\.batch_size = 0 is not allowed; use an integer",
        ),
        (
            {"clients": {"precision": "fp16"}},
            r"^clients\.precision = 'fp16' is not allowed; allowed",
        ),
        ({"clients": {"models": {}}}, r"^clients\.models = \{\} is not allowed; give positive"),
        ({"sites": {"public": "u.csv", "public_sha256": "ab"}}, r"^sites\.public_sha256 = 'ab' is"),
        ({"sites": {"public": "u.csv", "labels": ["a"]}}, r"^sites\.labels = \['a'\]: give the"),
        ({"faults": {"crash": -1}}, r"^faults\.crash = -1\.0 must be a fraction in \[0, 1\]$"),
        ({"faults": {"corruption": "x"}}, r"^faults\.corruption = 'x'; allowed: random, nan"),
    ],
)
def test_each_section_names_the_dotted_key_of_a_bad_value(raw, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


def test_a_rule_shared_with_torch_learner_is_one_constraint_object():
    import torch

    from cosmosfl.core.constraints import constraints_of
    from cosmosfl.experiment.schema import ClientsConfig
    from cosmosfl.learners.torch import LEARNER_CONSTRAINTS, TorchLearner

    clients, learner = constraints_of(ClientsConfig), constraints_of(TorchLearner)
    shared = ("lr", "distill_lr", "batch_size", "eval_batch_size", "precision")
    shared += ("consistency_samples", "consistency_target", "neighbour_bn")
    for name in shared:
        assert clients[name] is learner[name] is LEARNER_CONSTRAINTS[name]
    # One rule, two wordings: the config names the dotted key, the learner its argument.
    with pytest.raises(ConfigError, match=r"^clients\.distill_lr = 0\.0 is not allowed; use a"):
        config_from_dict({"clients": {"distill_lr": 0}})
    with pytest.raises(ValueError, match=r"^distill_lr must be > 0, got 0$"):
        TorchLearner(torch.nn.Linear(2, 2), num_classes=2, distill_lr=0)


def test_load_config_takes_a_mapping_with_overrides_and_data_dir_last(tmp_path):
    raw = {"rounds": 3, "data": {"data_dir": "ignored"}}
    cfg = load_config(raw, ["seed=5"], data_dir=tmp_path)
    assert (cfg.rounds, cfg.seed, cfg.data.data_dir) == (3, 5, str(tmp_path))
    assert raw == {"rounds": 3, "data": {"data_dir": "ignored"}}  # the caller's dict untouched
    # --data-dir wins over an override of the same key, as the CLI always had it
    assert load_config(None, ["data.data_dir=a"], data_dir="b").data.data_dir == "b"
    assert load_config(data_dir="my data: #2").data.data_dir == "my data: #2"  # not YAML
    # a file and the same settings as a mapping give the same config
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert dump_config(load_config(path, ["seed=5"])) == dump_config(load_config(raw, ["seed=5"]))


@pytest.mark.parametrize("raw", [None, [], "rounds: 3"])
def test_a_config_that_is_not_a_mapping_is_refused_not_taken_for_the_defaults(raw):
    with pytest.raises(ConfigError, match="must be a mapping"):
        config_from_dict(raw)


def test_a_runs_copy_sets_only_the_injected_fields_the_algorithm_has():
    def factory(shape, num_classes, seed):
        raise AssertionError("not built here")

    cosmos = config_from_dict({}).algorithm
    copy = cosmos.fresh(server_learner=factory, public_probe=None)
    assert copy is not cosmos.built and copy.server_learner is factory
    assert copy.public_probe is cosmos.built.public_probe  # None: left as it is
    local = config_from_dict({"algorithm": {"name": "local"}}).algorithm
    assert not hasattr(local.fresh(server_learner=factory), "server_learner")
