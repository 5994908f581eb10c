"""`cosmosfl compare`: planning, same-named settings, resume, identical splits, and the CLI."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from cosmosfl.algorithms.registry import ALGORITHMS
from cosmosfl.experiment import compare as compare_module
from cosmosfl.experiment.build import build_experiment
from cosmosfl.experiment.compare import (
    parse_algorithms,
    parse_seeds,
    plan_compare,
    run_compare,
)
from cosmosfl.experiment.config import ConfigError, config_from_dict
from cosmosfl.experiment.result import SimulationResult
from cosmosfl.reporting.report import write_report

BASE = {
    "rounds": 1,
    "threads": 1,
    "data": {"num_clients": 4, "num_groups": 2},
    "clients": {"models": {"mlp": 1}},
    "algorithm": {
        "name": "cosmos",
        "target_clusters": 2,
        "pretrain_epochs": 2,
        "local_epochs": 1,
        "server_epochs": 1,
        "distill_epochs": 1,
        "lam": 1.0,
        "server_model": "mlp",
    },
}


def settings(plan, algorithm, seed=1):
    run = next(r for r in plan.runs if r.algorithm == algorithm and r.seed == seed)
    return run.config.algorithm


def test_same_named_settings_are_copied_and_per_algorithm_overrides_applied(tmp_path):
    plan = plan_compare(
        BASE,
        ["cosmos", "local", "centralized"],
        [1, 2],
        tmp_path,
        ["algorithm.local_epochs=3", "local.pretrain_epochs=4", "rounds=2"],
    )
    assert [(r.algorithm, r.seed) for r in plan.runs] == [
        (a, s) for a in ("cosmos", "local", "centralized") for s in (1, 2)
    ]
    assert all(r.config.rounds == 2 for r in plan.runs)
    assert [r.config.seed for r in plan.runs] == [1, 2] * 3
    assert plan.runs[3].path == tmp_path / "local" / "seed2"
    cosmos = settings(plan, "cosmos")
    assert (cosmos["pretrain_epochs"], cosmos["local_epochs"], cosmos["lam"]) == (2, 3, 1.0)
    # local takes COSMOS's epochs, then its own override; centralized the same epochs
    assert settings(plan, "local") == {"name": "local", "pretrain_epochs": 4, "local_epochs": 3}
    assert settings(plan, "centralized", 2) == {
        "name": "centralized",
        "pretrain_epochs": 2,
        "local_epochs": 3,
    }


@pytest.mark.skipif("fedmd" not in ALGORITHMS, reason="needs the fedmd baseline")
def test_baseline_gets_cosmos_budget_but_not_its_regulariser(tmp_path):
    plan = plan_compare(BASE, ["cosmos", "fedmd"], [1], tmp_path, ["fedmd.distill_epochs=4"])
    fedmd = settings(plan, "fedmd")
    assert (fedmd["pretrain_epochs"], fedmd["local_epochs"], fedmd["distill_epochs"]) == (2, 1, 4)
    default_lam = config_from_dict({"algorithm": {"name": "fedmd"}}).algorithm["lam"]
    assert fedmd["lam"] == default_lam != BASE["algorithm"]["lam"]  # λ is COSMOS's own
    plan = plan_compare(BASE, ["cosmos", "fedmd"], [1], tmp_path, ["fedmd.lam=1"])
    assert settings(plan, "fedmd")["lam"] == 1.0


@pytest.mark.parametrize(
    ("algorithms", "overrides", "message"),
    [
        (["cosmos", "fedsgd"], [], r"unknown fedsgd; allowed: cosmos, .*centralized"),
        (["local"], ["local.distill_epochs=2"], r"allowed for local: local\.local_epochs"),
        (["local"], ["cosmos.lam=2"], r"is for cosmos, which is not in --algorithms \(local\)"),
        (["local"], ["fedsgd.lr=2"], r"'fedsgd' is neither a config key .* nor an algorithm"),
        (["local"], ["seed=3"], "--seeds"),
        (["local"], ["local.pretrain_epochs=-1"], r"local seed 1: .*pretrain_epochs must be"),
        (["local"], ["rounds=0"], "rounds = 0"),
    ],
)
def test_bad_comparisons_are_rejected_before_any_run(tmp_path, algorithms, overrides, message):
    with pytest.raises(ConfigError, match=message):
        plan_compare(BASE, algorithms, [1], tmp_path, overrides)
    assert not tmp_path.joinpath("compare.yaml").exists()


def test_parse_lists():
    assert parse_algorithms("cosmos, local,centralized") == ["cosmos", "local", "centralized"]
    assert parse_seeds("3,1,2") == [3, 1, 2]
    for bad in ("1,x", "", "1,1"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    with pytest.raises(ConfigError, match="twice"):
        parse_algorithms("local,local")


@pytest.mark.parametrize("other", [*sorted(set(ALGORITHMS) - {"cosmos"}), "centralized"])
def test_same_seed_gives_identical_splits_and_initial_clients_for_every_algorithm(other):
    # Parameter-sharing algorithms need one architecture; the others get a mixed federation.
    mixed = other not in ALGORITHMS or ALGORITHMS[other].model_agnostic
    models = {"mlp": 0.5, "cnn": 0.5} if mixed else {"cnn": 1.0}
    raw = {**BASE, "seed": 7, "clients": {"models": models}}
    a = build_experiment(config_from_dict(raw))
    b = build_experiment(config_from_dict({**raw, "algorithm": {"name": other}}))
    pa, pb = a.partition, b.partition
    for name in ("client_train", "client_test"):
        assert all(
            np.array_equal(x, y) for x, y in zip(getattr(pa, name), getattr(pb, name), strict=True)
        )
    assert np.array_equal(pa.public, pb.public)
    assert np.array_equal(a.public_x, b.public_x)
    # a mix is a mapping: its names are taken in sorted order, however it was written
    expected = ["cnn", "mlp", "cnn", "mlp"] if mixed else ["cnn"] * 4
    assert a.client_models == b.client_models == expected
    for ca, cb in zip(a.clients, b.clients, strict=True):
        sa, sb = ca.learner.model.state_dict(), cb.learner.model.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    # ... and a different seed does change them (the check above is not vacuous)
    c = build_experiment(config_from_dict({**raw, "seed": 8}))
    assert not np.array_equal(pa.client_train[0], c.partition.client_train[0])


def test_compare_writes_layout_resumes_and_guards_finished_runs(tmp_path, monkeypatch):
    algorithms = ["cosmos", "local", "centralized"]
    lines = []
    run_compare(plan_compare(BASE, algorithms, [1], tmp_path), progress=False, echo=lines.append)
    report = write_report(tmp_path)  # running writes no report: the CLI calls the writer after
    assert lines[0] == f"[1/3] cosmos seed 1 ... -> {tmp_path / 'cosmos' / 'seed1'}"
    for a in algorithms:
        run = tmp_path / a / "seed1"
        assert (run / "summary.json").is_file() and (run / "metrics.jsonl").is_file()
    for name in ("compare.yaml", "table.md", "table.tex", "communication.md", "curves.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (
        "algorithms:\n- cosmos\n- local\n- centralized" in (tmp_path / "compare.yaml").read_text()
    )
    # COSMOS: what each client deploys (reported, recipe validated), then h_π(i), f_i^(t,1)
    # and f_i^(t,2) in protocol order.
    assert [(r.algorithm, r.model) for r in report.rows] == [
        ("cosmos", "deployed"),
        ("cosmos", "cluster_model"),
        ("cosmos", "local"),
        ("cosmos", "client_model"),
        ("local", "client_model"),
        ("centralized", "client_model"),
    ]

    calls = []

    def fake_run(cfg, out, **kwargs):
        calls.append((cfg.algorithm["name"], kwargs["force"]))
        result = SimulationResult(cfg.algorithm["name"], "client_model")
        result.records.append({"accuracy": {"client_model": {"0": 1.0}}})
        return result

    monkeypatch.setattr(compare_module, "run_experiment", fake_run)
    lines.clear()
    run_compare(plan_compare(BASE, algorithms, [1], tmp_path), progress=False, echo=lines.append)
    assert calls == []  # nothing finished is recomputed
    assert lines == [f"[{i}/3] skip {a} seed 1: finished" for i, a in enumerate(algorithms, 1)]

    # an interrupted run (no summary.json) resumes from its checkpoint ...
    (tmp_path / "local" / "seed1" / "summary.json").unlink()
    lines.clear()
    run_compare(plan_compare(BASE, algorithms, [1], tmp_path), progress=False, echo=lines.append)
    assert calls == [] and "[2/3] resuming from its checkpoint" in lines
    assert (tmp_path / "local" / "seed1" / "summary.json").is_file()
    # ... and without a checkpoint it is the only one that runs again
    (tmp_path / "local" / "seed1" / "summary.json").unlink()
    (tmp_path / "local" / "seed1" / "checkpoint.pt").unlink()
    run_compare(plan_compare(BASE, algorithms, [1], tmp_path), progress=False, echo=lines.append)
    # started over in its own folder: forced, since run_experiment refuses recorded rounds
    assert calls == [("local", True)]

    # a finished run with another config stops everything unless --force
    calls.clear()
    changed = plan_compare(BASE, algorithms, [1], tmp_path, ["algorithm.local_epochs=2"])
    with pytest.raises(ConfigError, match=r"cosmos seed 1 .*algorithm\.local_epochs = 1 there, 2"):
        run_compare(changed, progress=False, echo=lines.append)
    assert calls == []
    run_compare(changed, force=True, progress=False, echo=lines.append)
    assert calls == [("cosmos", True), ("local", True), ("centralized", True)]


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "cosmosfl.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_compare_then_report(tmp_path, repo_root):
    out = tmp_path / "cmp"
    proc = cli(
        "compare", "-c", "configs/default.yaml", "-a", "local,centralized", "-o", str(out),
        "-q", "rounds=1", "clients.models={mlp: 1}", "algorithm.pretrain_epochs=1",
        "centralized.pretrain_epochs=2",
        cwd=repo_root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "[2/2] centralized seed 1" in proc.stdout and "| local (reference) |" in proc.stdout
    for name in ("table.md", "table.tex", "communication.md", "curves.png", "compare.yaml"):
        assert (out / name).is_file()
    assert "pretrain_epochs: 2" in (out / "centralized" / "seed1" / "config.yaml").read_text()
    (out / "table.md").unlink()
    proc = cli("report", str(out), cwd=repo_root)
    assert proc.returncode == 0, proc.stderr
    assert (out / "table.md").is_file() and "wrote" in proc.stdout
    proc = cli("report", str(tmp_path), cwd=repo_root)  # holds no <algorithm>/seed<k>/ runs
    assert proc.returncode == 2
    assert "cosmosfl: error: report: no finished runs" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_tracking_is_not_part_of_a_runs_identity(tmp_path):
    from cosmosfl.experiment.compare import config_differences, run_state
    from cosmosfl.experiment.config import dump_config
    from cosmosfl.experiment.rundir import CONFIG, SUMMARY
    from cosmosfl.experiment.runner import resumable

    plan = plan_compare(BASE, ["local"], [1], tmp_path)
    (run,) = plan.runs
    run.path.mkdir(parents=True)
    (run.path / CONFIG).write_text(dump_config(run.config))
    (run.path / "checkpoint.pt").write_bytes(b"")
    tracked = plan_compare(BASE, ["local"], [1], tmp_path, ["tracking.tensorboard=tb"]).runs[0]
    assert resumable(run.path, tracked.config)  # an unfinished run resumes, now tracked
    (run.path / SUMMARY).write_text("{}")
    assert run_state(tracked) == ("finished", [])
    old, new = run.config.to_dict(), tracked.config.to_dict()
    assert config_differences(old, new) == []
    new["rounds"] = 2
    assert config_differences(old, new) == ["rounds = 1 there, 2 now"]
