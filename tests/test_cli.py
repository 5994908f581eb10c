"""The real command line, end to end (subprocess), on digits."""

import json
import subprocess
import sys

import pytest

TINY = [
    "rounds=1",
    "clients.models={mlp: 0.8, logistic_regression: 0.2}",
    "algorithm.pretrain_epochs=2",
    "algorithm.server_epochs=1",
    "algorithm.distill_epochs=1",
]


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "cosmosfl.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, request):
    root = request.config.rootpath
    out = tmp_path_factory.mktemp("run") / "r"
    proc = cli("run", "-c", "configs/default.yaml", "--out", str(out), *TINY, cwd=root)
    return proc, out, root


def test_run_writes_run_directory(finished_run):
    proc, out, _ = finished_run
    assert proc.returncode == 0, proc.stderr
    assert "round  1" in proc.stdout and "reported" in proc.stdout
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1
    rec = records[0]
    for key in ("accuracy", "clusters", "K", "threshold", "bytes_up", "bytes_down", "seconds"):
        assert key in rec
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reported_model"] == "cluster_model"
    assert summary["final_round"]["mean_accuracy"] == rec["mean_accuracy"]
    assert "rounds: 1" in (out / "config.yaml").read_text()


def test_finished_run_not_overwritten_without_force(finished_run):
    _, out, root = finished_run
    proc = cli("run", "-c", "configs/default.yaml", "--out", str(out), *TINY, cwd=root)
    assert proc.returncode == 2
    assert "--force" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "rounds=zero"], "rounds = 'zero'"),
        (["run", "algorithm.colour=red"], "algorithm.colour"),
        (["run", "clients.models={lenet: 1}"], "unknown model(s) lenet"),
        (["run", "data.dataset=cifar10", "data.data_dir=/nonexistent"], "/nonexistent"),
        (["run", "-c", "missing.yaml"], "does not exist"),
    ],
)
def test_user_errors_are_one_clear_line_without_traceback(args, message, request, tmp_path):
    proc = cli(*args, "--out", str(tmp_path / "x"), cwd=request.config.rootpath)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_partition_prints_table_and_saves_plot(tmp_path, request):
    png = tmp_path / "labels.png"
    proc = cli(
        "partition", "-c", "configs/default.yaml", "--plot", str(png), cwd=request.config.rootpath
    )
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 1000
    for cid in range(10):
        assert f"{cid}" in proc.stdout


def test_show_config_prints_resolved_values(request):
    proc = cli("show-config", "-c", "configs/default.yaml", "rounds=7", cwd=request.config.rootpath)
    assert proc.returncode == 0
    assert "rounds: 7" in proc.stdout and "target_clusters: 5" in proc.stdout
    assert "# note:" not in proc.stdout  # default.yaml names its clustering


def test_show_config_notes_a_changed_default_the_config_relies_on(request):
    proc = cli("show-config", "-c", "configs/demo.yaml", cwd=request.config.rootpath)
    assert proc.returncode == 0
    assert "clustering: average-linkage" in proc.stdout
    notes = [line for line in proc.stdout.splitlines() if line.startswith("# note:")]
    assert len(notes) == 2 and "algorithm.recipe: paper" in notes[0]
    assert "algorithm.clustering: greedy" in notes[1]


def test_overrides_may_follow_options(capsys, request, monkeypatch):
    from cosmosfl.cli.main import main

    monkeypatch.chdir(request.config.rootpath)
    code = main(
        [
            "show-config",
            "-c",
            "configs/default.yaml",
            "seed=4",
            "--data-dir",
            "/d",
            "rounds=2",
            "data.num_clients=20",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "seed: 4" in out and "rounds: 2" in out and "num_clients: 20" in out
    assert "data_dir: /d" in out
    with pytest.raises(SystemExit):
        main(["show-config", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_learner_warnings_are_one_line_each(capsys, tmp_path, monkeypatch):
    from cosmosfl.cli.main import main

    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "run",
            "--out",
            str(tmp_path / "knn"),
            "rounds=1",
            "threads=1",
            "data.num_clients=4",
            "data.num_groups=2",
            "clients.models={knn: 0.5, mlp: 0.5}",
            "algorithm.name=comet",
            "algorithm.pretrain_epochs=1",
            "algorithm.distill_epochs=1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "cosmosfl: warning: KNeighborsClassifier ignores sample weights" in err
    assert "UserWarning" not in err and "self._refit" not in err  # no Python source lines
