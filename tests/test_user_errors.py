"""One test per class of user error: the one line the command line prints (exit 2, no traceback).

Each case goes through `cosmosfl.cli.main.main` in-process, exactly as the console script
does; the messages must name the field or file, the value, and what is allowed.
"""

from pathlib import Path

import numpy as np
import pytest

from cosmosfl.cli.main import main


def _npz(path: Path, **override) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (40, 8, 8, 1), dtype=np.uint8),
        "y_train": np.arange(40, dtype=np.int64) % 4,
        "x_test": rng.integers(0, 256, (20, 8, 8, 1), dtype=np.uint8),
        "y_test": np.arange(20, dtype=np.int64) % 4,
        "classes": np.array(["a", "b", "c", "d"]),
    }
    arrays.update(override)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def user_error(args, capsys) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("cosmosfl: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


CASES = {
    # config values
    "config: wrong type": (["rounds=ten"], "rounds = 'ten' must be of type int"),
    "config: out of range": (["data.num_clients=0"], "data.num_clients = 0 is not allowed"),
    "config: unknown key": (["data.clients=3"], "unknown key(s) data.clients; allowed in data"),
    "config: algorithm value": (["algorithm.temperature=-1"], "temperature must be >= 0"),
    "config: min_participation": (["min_participation=2"], "min_participation = 2.0"),
    "config: fault fraction": (["faults.dropout=1.5"], "faults.dropout = 1.5 must be a fraction"),
    "config: fault mode": (["faults.byzantine_mode=evil"], "allowed: random, flip, fixed"),
    "config: fault tasks": (["faults.tasks=[evaluate]"], "faults.tasks = ['evaluate']"),
    # model names
    "model: client": (["clients.models={lenet: 1}"], "unknown model(s) lenet; allowed:"),
    "model: server": (["algorithm.server_model=vgg17"], "server_model 'vgg17' is not"),
    # client mixes
    "mix: list length": (["clients.models=[mlp, cnn]"], "exactly data.num_clients = 10"),
    "mix: fractions": (["clients.models={mlp: 0}"], "give positive fractions"),
    "mix: centralized": (
        ["algorithm.name=centralized", "clients.models={logistic_regression: 1}"],
        "centralized",
    ),
}


@pytest.mark.parametrize(("args", "message"), list(CASES.values()), ids=list(CASES))
def test_config_model_and_mix_errors(args, message, capsys, tmp_path):
    err = user_error(["run", "--out", str(tmp_path / "x"), *args], capsys)
    assert message in err
    assert not (tmp_path / "x").exists()  # nothing is written before the config is valid


DATA_CASES = {
    "missing file": (None, "does not exist"),
    "wrong layout": ({"x_test": None}, "x_test"),
    "labels out of range": (
        {"y_test": np.full(20, 7, dtype=np.int64)},
        "allowed are 0..3",
    ),
    "mismatched lengths": ({"y_train": np.zeros(39, np.int64)}, "40 images but y_train has 39"),
    "float labels": ({"y_train": np.zeros(40, np.float32)}, "integer label"),
}


@pytest.mark.parametrize(("override", "message"), list(DATA_CASES.values()), ids=list(DATA_CASES))
def test_dataset_file_errors(override, message, capsys, tmp_path):
    path = tmp_path / "mine.npz"
    if override is not None:
        _npz(path, **override)
    err = user_error(
        ["run", "--out", str(tmp_path / "x"), f"data.dataset={path}", "data.num_clients=2"], capsys
    )
    assert message in err and "mine" in err


def test_a_valid_file_passes_the_same_checks(capsys, tmp_path):
    path = _npz(tmp_path / "mine.npz")
    code = main(["partition", f"data.dataset={path}", "data.num_clients=2", "data.num_groups=2"])
    assert code == 0, capsys.readouterr().err


def test_too_few_clients_answering_is_one_line_exit_1(capsys, tmp_path):
    code = main(
        ["run", "-q", "--out", str(tmp_path / "x"), "faults.dropout=0.9", "min_participation=0.5"]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "clients answered task 'train_local'; min_participation = 0.5 needs 5" in err


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_a_device_this_machine_lacks_is_one_line(device, capsys, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    err = user_error(["run", f"device={device}", "rounds=1", "--out", str(tmp_path / "r")], capsys)
    assert f"device '{device}' was requested but" in err and "use device=cpu" in err
