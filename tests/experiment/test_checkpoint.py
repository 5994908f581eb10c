"""Checkpoint and resume: an interrupted run, resumed, ends with exactly the metrics of an
uninterrupted one; a kill in the middle of a checkpoint write leaves the previous one usable."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cosmosfl.engines.progress import Reporter
from cosmosfl.experiment.checkpoint import HOOK_ENV, CheckpointError, load_checkpoint
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.rundir import metrics_csv, read_records
from cosmosfl.experiment.runner import resume_experiment, run_experiment

TINY = [
    "threads=1",
    "data.num_clients=6",
    "clients.models={mlp: 0.8, logistic_regression: 0.2}",
    "algorithm.pretrain_epochs=2",
    "algorithm.local_epochs=1",
]
PER_ALGORITHM = {
    "cosmos": [
        "algorithm.server_epochs=1",
        "algorithm.distill_epochs=1",
        "algorithm.server_model=mlp",
    ],
    "fedmd": ["algorithm.distill_epochs=1"],
    "fedct": [],
    "comet": ["algorithm.distill_epochs=1"],
    "local": [],
}


def strip(records):
    """Everything a run computed; not the wall-clock seconds."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


class StopBefore(Reporter):
    """Raises KeyboardInterrupt (as Ctrl-C would) when round `n` starts."""

    def __init__(self, n):
        self.n = n

    def round_start(self, round_num, rounds):
        if round_num == self.n:
            raise KeyboardInterrupt


@pytest.mark.parametrize(
    "name",
    [n if n == "cosmos" else pytest.param(n, marks=pytest.mark.slow) for n in PER_ALGORITHM],
)
def test_interrupted_and_resumed_equals_uninterrupted(name, tmp_path):
    overrides = [*TINY, "rounds=3", f"algorithm.name={name}", *PER_ALGORITHM[name]]
    if name == "cosmos":  # faults are seeded per round, so a resumed run sees the same ones
        overrides += ["faults.dropout=0.2", "faults.corrupt=0.1"]
    cfg = load_config(None, overrides)  # digits
    state = torch.get_rng_state()
    whole = run_experiment(cfg, tmp_path / "whole", progress=False)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "cut", progress=StopBefore(3))
    assert load_checkpoint(tmp_path / "cut")["round"] == 2
    torch.manual_seed(12345)  # the caller's RNG must not matter: the checkpoint restores it
    resumed = resume_experiment(tmp_path / "cut", progress=False)
    torch.set_rng_state(state)
    assert strip(resumed.records) == strip(whole.records)
    assert strip(read_records(tmp_path / "cut")) == strip(whole.records)
    csv_text = (tmp_path / "cut" / "metrics.csv").read_text()
    assert csv_text == metrics_csv(read_records(tmp_path / "cut"))
    assert resumed.summary["final_round"] == whole.summary["final_round"]


def test_resume_errors_say_what_to_do(tmp_path):
    cfg = load_config(None, [*TINY, "rounds=2", "algorithm.name=local"])
    with pytest.raises(CheckpointError, match=r"no checkpoint\.pt: no round"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "config.yaml").write_text("rounds: 2\n")
        resume_experiment(tmp_path / "empty")
    with pytest.raises(CheckpointError, match="not a run directory"):
        resume_experiment(tmp_path / "nothing")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, tmp_path / "cut", progress=StopBefore(2))
    with pytest.raises(ConfigError, match=r"interrupted run with a checkpoint.*--resume"):
        run_experiment(cfg, tmp_path / "cut", progress=False)
    config = tmp_path / "cut" / "config.yaml"
    original = config.read_text()
    config.write_text(original.replace("rounds: 2", "rounds: 3"))
    with pytest.raises(CheckpointError, match="differs from the config the checkpoint"):
        resume_experiment(tmp_path / "cut")
    config.write_text(original)
    resume_experiment(tmp_path / "cut", progress=False)
    with pytest.raises(CheckpointError, match="already holds a finished run"):
        resume_experiment(tmp_path / "cut")
    (tmp_path / "cut" / "summary.json").unlink()
    (tmp_path / "cut" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be read"):
        resume_experiment(tmp_path / "cut")


# -- the real command line, killed -----------------------------------------------------------
CLI_RUN = ["run", "rounds=4", *TINY, *PER_ALGORITHM["cosmos"]]


def cli(*args, cwd, env=None, wait=True):
    cmd = [sys.executable, "-m", "cosmosfl.cli.main", *args]
    full_env = {**os.environ, **(env or {})}
    if not wait:
        return subprocess.Popen(
            cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("whole") / "run"
    proc = cli(*CLI_RUN, "--out", str(out), "-q", cwd=request.config.rootpath)
    assert proc.returncode == 0, proc.stderr
    return strip(read_records(out))


def _wait_for_round(out: Path, round_num: int, proc) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (out / "checkpoint.pt").is_file() and load_checkpoint(out)["round"] == round_num:
            return
        time.sleep(0.2)
    pytest.fail(f"no checkpoint of round {round_num} appeared")


@pytest.mark.parametrize(
    "sig",
    [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
    ids=["SIGKILL", "Ctrl-C"],
)
def test_killed_after_round_2_of_4_then_resumed_equals_uninterrupted(
    sig, uninterrupted, tmp_path, request
):
    root, out = request.config.rootpath, tmp_path / "run"
    # The hook holds the process right after round 2's checkpoint, so the kill lands there.
    proc = cli(*CLI_RUN, "--out", str(out), cwd=root, env={HOOK_ENV: "pause-after:2"}, wait=False)
    _wait_for_round(out, 2, proc)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # Ctrl-C: a clean stop with the command that continues the run
        assert proc.returncode == 130
        assert f"cosmosfl run --resume {out}" in stderr and "Traceback" not in stderr
    assert not (out / "summary.json").exists()
    resumed = cli("run", "--resume", str(out), "-q", cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    assert strip(read_records(out)) == uninterrupted
    assert json.loads((out / "summary.json").read_text())["rounds"] == 4


def test_kill_during_checkpoint_write_leaves_the_previous_checkpoint(
    uninterrupted, tmp_path, request
):
    root, out = request.config.rootpath, tmp_path / "run"
    # Dies after writing round 3's temporary file, before it replaces round 2's checkpoint.
    proc = cli(*CLI_RUN, "--out", str(out), cwd=root, env={HOOK_ENV: "kill-before-rename:3"})
    assert proc.returncode == -signal.SIGKILL
    assert list(out.glob(".checkpoint.pt.*")), "the half-done write should be left behind"
    assert load_checkpoint(out)["round"] == 2
    # a round's record is appended only after its checkpoint is in place
    assert len(read_records(out)) == 2
    # the killed run's lock is left behind; its process is gone, so it is stale and taken over
    assert (out / ".cosmosfl-lock").is_file()
    resumed = cli("run", "--resume", str(out), "-q", cwd=root)
    assert resumed.returncode == 0, resumed.stderr
    assert not (out / ".cosmosfl-lock").exists()
    assert strip(read_records(out)) == uninterrupted
    # metrics.csv lost round 3's cut-short rows with metrics.jsonl
    assert (out / "metrics.csv").read_text() == metrics_csv(read_records(out))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resume", "{out}", "rounds=5"], "remove key=value overrides"),
        (["--resume", "{out}", "--force"], "remove --force"),
        (["--resume", "{missing}"], "is not a run directory"),
    ],
)
def test_cli_resume_user_errors(args, message, tmp_path, capsys):
    from cosmosfl.cli.main import main

    out = tmp_path / "r"
    out.mkdir()
    args = [a.format(out=out, missing=tmp_path / "missing") for a in args]
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
