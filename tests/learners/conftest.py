"""The fixed batch the fast-path tests share (test_torch.py, test_batched.py)."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    return rng.standard_normal((48, 3, 16, 16)).astype(np.float32), rng.integers(0, 10, 48)
