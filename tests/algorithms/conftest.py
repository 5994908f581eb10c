"""The runs of the model-agnostic baselines, shared by test_baselines.py and the tests of each
method (test_fedmd.py, test_fedct.py, test_comet.py): computed once per session.

test_parameter_baselines.py defines a `runs` fixture of its own (the parameter-sharing
baselines), which takes precedence there.
"""

import pytest

from cosmosfl.algorithms import Comet, FedCT, FedMD

from .test_baselines import FAST, run


@pytest.fixture(scope="session")
def runs():
    return {
        "fedmd": run(FedMD(**FAST, distill_epochs=1)),
        "fedct": run(FedCT(**FAST)),
        # Enough pre-training for the pseudo-labels of the 5 class groups to separate.
        "comet": run(Comet(num_clusters=5, pretrain_epochs=10, local_epochs=1, distill_epochs=1)),
    }
