"""Run folders are never clobbered: cosmosfl writes only into folders it made (or is forced
to), one process at a time, and a kill between a round's record and its checkpoint loses
nothing."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cosmosfl.cli.main import main
from cosmosfl.experiment import round_callbacks
from cosmosfl.experiment.config import ConfigError, load_config
from cosmosfl.experiment.rundir import LOCK, MARKER, RunDirectory, read_records
from cosmosfl.experiment.runner import resume_experiment, run_experiment

TINY = [
    "threads=1",
    "data.num_clients=5",
    "clients.models={logistic_regression: 1.0}",
    "algorithm.name=local",
    "algorithm.pretrain_epochs=1",
    "algorithm.local_epochs=1",
]


def strip(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


@pytest.mark.parametrize("theirs", ["config.yaml", "metrics.csv"])
def test_user_files_in_out_are_not_overwritten_without_force(theirs, tmp_path, capsys):
    """`--out .` in a folder with the user's own config.yaml (comments and all) or a
    metrics.csv: refused with one line, the file untouched."""
    own = tmp_path / theirs
    text = "# my notes, keep them\nrounds: 1\n"
    own.write_text(text)
    code = main(["run", "--out", str(tmp_path), "-q", "rounds=1", *TINY])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "cosmosfl did not write" in err and "--force" in err
    assert own.read_text() == text
    assert not (tmp_path / MARKER).exists()


def test_a_folder_cosmosfl_made_is_marked_and_forced_runs_overwrite(tmp_path):
    (tmp_path / "config.yaml").write_text("# mine\n")
    cfg = load_config(None, ["rounds=1", *TINY])
    run_experiment(cfg, tmp_path, progress=False, force=True)
    assert (tmp_path / MARKER).is_file()
    assert not (tmp_path / LOCK).exists()  # released on exit
    assert "# mine" not in (tmp_path / "config.yaml").read_text()


def test_a_second_writer_is_refused_while_the_folder_is_locked(tmp_path):
    """Two runs into one --out: the second is refused (one line naming the holder), not
    interleaved into the first's metrics.jsonl."""
    cfg = load_config(None, ["rounds=1", *TINY])
    with RunDirectory(tmp_path).locked():
        holder = json.loads((tmp_path / LOCK).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(ConfigError, match=rf"another cosmosfl run \(process {os.getpid()}"):
            run_experiment(cfg, tmp_path, progress=False)
    assert not (tmp_path / LOCK).exists()
    assert not (tmp_path / "metrics.jsonl").exists()


def test_a_lock_left_by_a_dead_process_is_stale_and_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    cfg = load_config(None, ["rounds=1", *TINY])
    run_experiment(cfg, tmp_path, progress=False, force=True)
    assert len(read_records(tmp_path)) == 1
    assert not (tmp_path / LOCK).exists()
    # a lock held on another host cannot be judged: refused, with how to clear it
    (tmp_path / LOCK).write_text(json.dumps({"pid": 1, "host": "elsewhere.invalid"}))
    with pytest.raises(ConfigError, match=r"process 1 on elsewhere\.invalid.*delete"):
        run_experiment(cfg, tmp_path, progress=False, force=True)


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not even `except Exception`)."""


@pytest.mark.parametrize("killed_after", ["record", "checkpoint"])
def test_a_kill_between_record_and_checkpoint_loses_nothing(killed_after, tmp_path, monkeypatch):
    """Killed after round 1's first write (metrics.jsonl or checkpoint.pt, whichever the
    runner writes first): --resume continues to the uninterrupted records, and a plain run
    into the folder does not wipe a recorded round."""
    cfg = load_config(None, ["rounds=2", *TINY])
    whole = run_experiment(cfg, tmp_path / "whole", progress=False)
    real_append, real_save = RunDirectory.append_record, round_callbacks.save_checkpoint

    def append_then_die(self, record):
        real_append(self, record)
        if killed_after == "record":
            raise Killed

    def save_then_die(*args, **kwargs):
        real_save(*args, **kwargs)
        if killed_after == "checkpoint":
            raise Killed

    monkeypatch.setattr(RunDirectory, "append_record", append_then_die)
    monkeypatch.setattr(round_callbacks, "save_checkpoint", save_then_die)
    cut = tmp_path / "cut"
    with pytest.raises(Killed):
        run_experiment(cfg, cut, progress=False)
    monkeypatch.undo()
    (cut / LOCK).unlink(missing_ok=True)  # a real kill leaves it; stale-lock test covers that
    if RunDirectory(cut).recorded_rounds():  # a recorded round is never overwritten by a plain run
        with pytest.raises(ConfigError):
            run_experiment(cfg, cut, progress=False)
    resumed = resume_experiment(cut, progress=False)
    assert strip(resumed.records) == strip(whole.records)
    assert strip(read_records(cut)) == strip(whole.records)


def test_out_naming_a_file_is_one_line(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    assert main(["run", "--out", str(target), "-q", "rounds=1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file" in err
    assert main(["run", "--out", str(target / "sub"), "-q", "rounds=1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file" in err
    assert target.read_text() == "mine\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (Linux)")
def test_out_in_an_unwritable_place_is_one_line(capsys):
    # /proc refuses new folders even to root, so this needs no permission tricks
    assert main(["run", "--out", "/proc/cosmosfl-run-here", "-q", "rounds=1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot" in err and "/proc/cosmosfl-run-here" in err


def test_a_run_is_refused_while_another_process_writes_the_folder(tmp_path, capsys):
    """Another process holds the folder: the run is refused with one line naming it; once
    that process is killed outright, its lock is stale and the next run takes the folder."""
    hold = (
        "import sys, time\nfrom pathlib import Path\n"
        "from cosmosfl.experiment.rundir import RunDirectory\n"
        "with RunDirectory(Path(sys.argv[1])).locked():\n"
        "    print('held', flush=True)\n    time.sleep(300)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(["run", "--out", str(tmp_path), "-q", "rounds=1", *TINY])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and f"process {holder.pid}" in err
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / LOCK).is_file()  # SIGKILL: nothing removed it
    assert main(["run", "--out", str(tmp_path), "-q", "rounds=1", *TINY]) == 0
    assert not (tmp_path / LOCK).exists() and len(read_records(tmp_path)) == 1


def test_compare_starts_over_its_own_cut_short_run_without_a_checkpoint(tmp_path):
    """A compare run cut short before any checkpoint (a reference run keeps none) is in a
    folder cosmosfl made: compare starts it over; a plain `run` would need --force."""
    from cosmosfl.experiment.compare import plan_compare, run_compare

    plan = plan_compare({}, ["local"], [1], tmp_path, ["rounds=1", *TINY[:-2]])
    (run,) = plan.runs
    RunDirectory(run.path).prepare(run.config)
    (run.path / "metrics.jsonl").write_text('{"round": 1}\n')  # a record, no checkpoint
    with pytest.raises(ConfigError, match="interrupted run"):
        run_experiment(run.config, run.path, progress=False)
    outcome = run_compare(plan, progress=False, echo=lambda line: None)
    assert outcome.ran == [run] and len(read_records(run.path)) == 1
    assert read_records(run.path)[0]["round"] == 1 and "accuracy" in read_records(run.path)[0]
