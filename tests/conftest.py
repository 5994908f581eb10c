import os
from pathlib import Path

import pytest
import torch

# The models in tests are tiny: one thread avoids thread start-up and oversubscription costs.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("COSMOSFL_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture
def repo_root() -> Path:
    return REPO
