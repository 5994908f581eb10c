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


# -- sites that bring their own files (examples/sites/make_sites.py, the tutorial's) -----------
SMALL_SITES = ["rounds=2", "threads=1", "algorithm.pretrain_epochs=2", "algorithm.local_epochs=1"]
SITE_NAMES = ("hospital-a", "hospital-b", "clinic-c")


@pytest.fixture
def sites_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example federation (a logistic regression, a torch mlp and a random forest
    site; U in public.csv; the run config run.yaml), written into tmp_path/org, which becomes
    the working directory (the config names its files relative to it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_sites", REPO / "examples" / "sites" / "make_sites.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = tmp_path / "org"
    module.write(root, models=["logistic_regression", "mlp", "random_forest"], scale=0.5)
    monkeypatch.chdir(root)
    return root
