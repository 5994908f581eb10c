import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

# The models in tests are tiny: one thread avoids thread start-up and oversubscription costs.
torch.set_num_threads(1)

# Property-based suites (*_fuzz.py). "ci", the default: few examples, derandomized so every run
# of the default suite tests the same inputs (a CI failure reproduces locally). "thorough":
# HYPOTHESIS_PROFILE=thorough for long local fuzzing, random and with an example database
# (.hypothesis/, not committed) that replays failures first.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("COSMOSFL_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture
def repo_root() -> Path:
    return REPO
