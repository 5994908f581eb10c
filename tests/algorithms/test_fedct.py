"""FedCT (algorithms/fedct.py): only integer labels cross the wire, and the majority vote."""

import numpy as np
import pytest

from cosmosfl.algorithms import majority_vote
from cosmosfl.core import protocol

from .test_baselines import M


def test_fedct_only_integer_labels_cross_the_wire(runs):
    _, traffic, n, _ = runs["fedct"]
    arrays = [(d, task, a) for _, d, _, task, msg in traffic for a in msg.values()]
    assert {d for d, _, _ in arrays} == {"up", "down"}
    for direction, task, a in arrays:
        assert np.issubdtype(a.dtype, np.unsignedinteger), (direction, task, a.dtype)
        assert a.dtype == np.uint8 and a.shape == (n,), (direction, task, a.shape)
    # Every client trains on U labelled by the same consensus (the vote of the same round).
    for t in (1, 2):
        sent = [
            msg["public_labels"]
            for r, d, _, task, msg in traffic
            if r == t and d == "down" and task == protocol.TRAIN_LOCAL and msg
        ]
        assert len(sent) == 10 and all(np.array_equal(sent[0], s) for s in sent)
        votes = [msg["labels"] for r, d, _, _, msg in traffic if r == t and d == "up" and msg]
        np.testing.assert_array_equal(sent[0], majority_vote(votes, M))


def test_majority_vote_breaks_ties_to_the_lowest_class():
    votes = [
        np.array([0, 1, 2, 3, 4], dtype=np.uint8),
        np.array([0, 2, 2, 1, 3], dtype=np.uint8),
        np.array([1, 2, 0, 1, 2], dtype=np.uint8),
        np.array([1, 1, 0, 3, 1], dtype=np.uint8),
    ]
    # sample 0: 0,0,1,1 tie -> 0; 1: 1,2,2,1 tie -> 1; 2: 2,2,0,0 tie -> 0;
    # sample 3: 3,1,1,3 tie -> 1; sample 4: 4,3,2,1 four-way tie -> 1.
    np.testing.assert_array_equal(majority_vote(votes, 5), [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(majority_vote(votes[:3], 5), [0, 2, 2, 1, 2])
    np.testing.assert_array_equal(majority_vote([np.array([7, 0])], 8), [7, 0])
    with pytest.raises(ValueError, match="lie in"):
        majority_vote([np.array([5])], 5)
    with pytest.raises(ValueError, match="without any"):
        majority_vote([], 5)
