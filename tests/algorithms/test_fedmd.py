"""FedMD (algorithms/fedmd.py): one consensus of the clients' soft labels for every client."""

import numpy as np

from cosmosfl.core import protocol

from .test_baselines import M


def test_fedmd_sends_one_consensus_to_every_client(runs):
    _, traffic, n, _ = runs["fedmd"]
    for t in (1, 2):
        targets = [
            msg["targets"]
            for r, d, _, task, msg in traffic
            if r == t and d == "down" and task == protocol.DISTILL
        ]
        assert len(targets) == 10 and targets[0].shape == (n, M)
        assert all(np.array_equal(targets[0], x) for x in targets)
        probs = [msg["probs"] for r, d, _, _, msg in traffic if r == t and d == "up" and msg]
        np.testing.assert_allclose(targets[0], np.mean(probs, axis=0), atol=1e-6)
