"""FedAvg (algorithms/fedavg.py): one IID epoch gives the hand-computed weighted average."""

import itertools

import numpy as np
import torch

from cosmosfl.algorithms import FedAvg
from cosmosfl.engines import InProcessEngine

from .test_parameter_baselines import federation, run


def iid_split(n_train, n_test, sizes=(40, 70, 100, 130)):
    """Disjoint random (IID) client sets of unequal sizes, so the weighting matters."""
    rng = np.random.default_rng(0)
    order = rng.permutation(n_train)
    bounds = np.cumsum((0, *sizes))
    train = [order[a:b] for a, b in itertools.pairwise(bounds)]
    tests = np.array_split(rng.permutation(n_test)[:200], len(sizes))
    return train, tests, order[bounds[-1] : bounds[-1] + 50]


def test_fedavg_one_epoch_iid_equals_hand_computed_weighted_average():
    split = iid_split
    clients, public_x = federation(4, split=split)
    # Independent copies of the clients as they start (same weights, same random stream).
    twins, _ = federation(4, split=split)
    algo = FedAvg(pretrain_epochs=1, local_epochs=1)
    run(algo, rounds=1, clients=(clients, public_x), engine_cls=InProcessEngine)
    start = {n: t.detach().numpy().copy() for n, t in twins[0].learner.model.state_dict().items()}
    trained, sizes = [], []
    for twin in twins:
        twin.learner.model.load_state_dict({n: torch.from_numpy(a) for n, a in start.items()})
        twin.learner.fit(*twin.train, epochs=1)
        trained.append(
            {
                n: t.detach().numpy().astype(np.float64)
                for n, t in twin.learner.model.state_dict().items()
            }
        )
        sizes.append(len(twin.train[0]))
    assert sizes == [40, 70, 100, 130]
    total = sum(sizes)
    expected = {
        n: sum(s * w[n] for s, w in zip(sizes, trained, strict=True)) / total for n in start
    }
    got = algo.get_state()["global"]["weights"]
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-6)
    # Every client now holds the averaged model.
    for c in clients:
        for name, value in c.learner.get_weights().items():
            np.testing.assert_array_equal(value, got[name])
