"""`cosmosfl sweep`: grid parsing, planning on compare's machinery, shared runs, resume."""

import pytest
import yaml

from cosmosfl.experiment import compare as compare_module
from cosmosfl.experiment.compare import plan_compare
from cosmosfl.experiment.config import ConfigError, dump_config
from cosmosfl.experiment.sweep import folder_name, parse_grid, plan_sweep, run_sweep
from cosmosfl.reporting.ablation import write_ablation_report

BASE = {
    "rounds": 1,
    "threads": 1,
    "data": {"num_clients": 4, "num_groups": 2},
    "clients": {"models": {"mlp": 1}},
    "algorithm": {
        "name": "cosmos",
        "target_clusters": 2,
        "pretrain_epochs": 1,
        "local_epochs": 1,
        "server_epochs": 1,
        "distill_epochs": 1,
        "server_model": "mlp",
    },
}


def test_grid_values_are_parsed_like_overrides():
    assert parse_grid("data.num_clients=5,10").values == [5, 10]
    assert parse_grid("cosmos.lam=0, 0.5,5").values == [0, 0.5, 5]
    assert parse_grid("clients.lr=1e-3,2.5E-4").values == [0.001, 0.00025]  # numbers, not text
    assert parse_grid("algorithm.server_model=cnn,mlp").values == ["cnn", "mlp"]
    axis = parse_grid("clients.models={mlp: 1},{cnn: 0.5, mlp: 0.5}")
    assert axis.values == [{"mlp": 1}, {"cnn": 0.5, "mlp": 0.5}]
    assert parse_grid("clients.models=[mlp, cnn],[cnn, mlp]").values == [
        ["mlp", "cnn"],
        ["cnn", "mlp"],
    ]
    assert axis.key == "clients.models"


def test_folder_names_are_safe_and_distinct():
    assert folder_name("data.num_clients", 5) == "data.num_clients=5"
    assert folder_name("clients.lr", 1e-5) == "clients.lr=1.0e-05"
    a = folder_name("clients.models", {"cnn": 0.5, "mlp": 0.5})
    b = folder_name("clients.models", ["cnn", 0.5, "mlp", 0.5])  # sanitises to the same text
    assert a.startswith("clients.models=cnn_0.5_mlp_0.5-") and a != b
    for name in (a, b, folder_name("x", "a/b c"), folder_name("x", "")):
        assert "/" not in name and " " not in name and "{" not in name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("data.num_clients", r"must look like KEY=V1,V2"),
        ("=5,10", "has an empty key"),
        ("data..num_clients=5", "has an empty key"),
        ("data.num_clients=", "lists no values"),
        ("data.num_clients= , ,", "lists no values"),
        ("clients.models={mlp: 1", "not valid YAML"),
        ("cosmos.lam=0,5,0.0", "names the value 0.0 twice"),
    ],
)
def test_bad_grids_are_clear_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_grid(text)


@pytest.mark.parametrize(
    ("grid", "algorithms", "message"),
    [
        ("data.num_client=5", ["cosmos"], r"unknown key; allowed in data: data\.dataset, "),
        ("algorithm.lr=1", ["cosmos"], r"allowed in the base algorithm section \(cosmos\)"),
        ("cosmos.foo=1", ["cosmos"], r"allowed in cosmos: cosmos\.aggregation"),
        ("fedmd.lam=1", ["cosmos"], r"is for fedmd, which is not in --algorithms \(cosmos\)"),
        ("wandb.x=1", ["cosmos"], r"'wandb' is neither a config key .* nor an algorithm"),
        ("seed=1,2", ["cosmos"], r"not a grid key \(the seeds come from --seeds\)"),
        ("algorithm.name=local", ["cosmos"], "come from --algorithms"),
        ("tracking.tensorboard=a", ["cosmos"], "not what they compute"),
        ("rounds.x=1", ["cosmos"], r"allowed in the run settings: rounds"),
    ],
)
def test_bad_grid_keys_are_rejected_before_anything_runs(tmp_path, grid, algorithms, message):
    with pytest.raises(ConfigError, match=message):
        plan_sweep(BASE, [parse_grid(grid)], algorithms, [1], tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


def test_one_error_lists_every_bad_cell(tmp_path):
    axes = [parse_grid("data.num_clients=0,4"), parse_grid("local.local_epochs=1,-2")]
    with pytest.raises(ConfigError) as err:
        plan_sweep(BASE, axes, ["local"], [1], tmp_path / "sw")
    text = str(err.value)
    assert text.startswith("3 of 4 sweep cells are invalid (nothing has run):\n")
    assert "  data.num_clients=0 local.local_epochs=1: data.num_clients = 0 is not" in text
    assert "  data.num_clients=0 local.local_epochs=-2: data.num_clients = 0" in text
    assert "  data.num_clients=4 local.local_epochs=-2: local seed 1: " in text
    assert "local_epochs" in text.splitlines()[-1]
    assert "data.num_clients=4 local.local_epochs=1:" not in text
    assert not (tmp_path / "sw").exists()
    with pytest.raises(ConfigError, match="rounds=3: set both by --grid and as an override"):
        plan_sweep(BASE, [parse_grid("rounds=1,2")], ["local"], [1], tmp_path, ["rounds=3"])
    with pytest.raises(ConfigError, match=r"^every sweep cell: rounds = 0"):
        plan_sweep(BASE, [parse_grid("data.alpha=1,2")], ["local"], [1], tmp_path, ["rounds=0"])


def test_cells_are_compare_plans_and_runs_without_the_key_are_shared(tmp_path):
    axes = [parse_grid("data.num_clients=4,6"), parse_grid("cosmos.lam=0,5")]
    plan = plan_sweep(BASE, axes, ["cosmos", "local"], [1, 2], tmp_path, ["rounds=2"])
    assert [c.path.relative_to(tmp_path).as_posix() for c in plan.cells] == [
        "data.num_clients=4/cosmos.lam=0",
        "data.num_clients=4/cosmos.lam=5",
        "data.num_clients=6/cosmos.lam=0",
        "data.num_clients=6/cosmos.lam=5",
    ]
    assert len(plan.runs) == 4 * 2 * 2
    # each cell's run is exactly the run compare plans for that setting
    cell = plan.cells[3]
    same = plan_compare(
        BASE, ["cosmos", "local"], [1, 2], cell.path,
        ["rounds=2", "data.num_clients=6", "cosmos.lam=5"],
    )  # fmt: skip
    assert [dump_config(r.config) for r in cell.plan.runs] == [
        dump_config(r.config) for r in same.runs
    ]
    assert cell.plan.runs[0].config.algorithm["lam"] == 5.0
    assert cell.plan.runs[0].config.data.num_clients == 6
    # local has no λ: its runs at λ = 5 are those at λ = 0, trained once
    shared = [(r.cell.label(), r.run.algorithm, r.same_as.cell.label()) for r in plan.runs
              if r.same_as is not None]  # fmt: skip
    assert shared == [
        ("data.num_clients=4 cosmos.lam=5", "local", "data.num_clients=4 cosmos.lam=0"),
        ("data.num_clients=4 cosmos.lam=5", "local", "data.num_clients=4 cosmos.lam=0"),
        ("data.num_clients=6 cosmos.lam=5", "local", "data.num_clients=6 cosmos.lam=0"),
        ("data.num_clients=6 cosmos.lam=5", "local", "data.num_clients=6 cosmos.lam=0"),
    ]
    assert "4 of them are the same experiment" in "\n".join(plan.describe())


def test_sweep_runs_resumes_and_guards_finished_runs(tmp_path, monkeypatch):
    axes = [parse_grid("data.num_clients=4,6"), parse_grid("cosmos.lam=0,1")]
    algorithms = ["cosmos", "local"]

    def plan(*overrides):
        return plan_sweep(BASE, axes, algorithms, [1], tmp_path, list(overrides))

    lines = []
    outcome = run_sweep(plan(), progress=False, echo=lines.append)
    write_ablation_report(tmp_path)  # running writes no report: the CLI calls the writer after
    assert (len(outcome.ran), len(outcome.skipped), len(outcome.shared)) == (6, 0, 2)
    doc = yaml.safe_load((tmp_path / "sweep.yaml").read_text())
    assert doc["grid"][1] == {"key": "cosmos.lam", "values": [0, 1], "folders": [
        "cosmos.lam=0", "cosmos.lam=1"]}  # fmt: skip
    assert doc["cells"][1] == {
        "path": "data.num_clients=4/cosmos.lam=1",
        "values": {"data.num_clients": 4, "cosmos.lam": 1},
    }
    link = tmp_path / "data.num_clients=4" / "cosmos.lam=1" / "local" / "seed1"
    assert link.is_symlink() and (link / "summary.json").is_file()
    assert doc["shared_runs"]["data.num_clients=4/cosmos.lam=1/local/seed1"] == (
        "data.num_clients=4/cosmos.lam=0/local/seed1"
    )
    for key in ("data.num_clients", "cosmos.lam"):
        assert (tmp_path / f"ablation-{key}.png").stat().st_size > 5000
        assert (tmp_path / f"ablation-{key}.md").is_file()
    assert "(1/8 runs done, ETA" in lines[2]  # an ETA once a run has finished

    calls = []

    def fake_run(cfg, out, **kwargs):
        calls.append((cfg.algorithm["name"], cfg.data.num_clients, kwargs["force"]))
        raise AssertionError("a finished run was recomputed")

    monkeypatch.setattr(compare_module, "run_experiment", fake_run)
    lines.clear()
    outcome = run_sweep(plan("tracking.tensorboard=tb"), progress=False, echo=lines.append)
    assert calls == [] and (len(outcome.skipped), len(outcome.shared)) == (6, 2)
    assert lines[0] == "[1/8] skip data.num_clients=4 cosmos.lam=0 cosmos seed 1: finished"
    assert lines[3] == (
        "[4/8] data.num_clients=4 cosmos.lam=1 local seed 1: same run as "
        "data.num_clients=4 cosmos.lam=0 local seed 1"
    )

    # a finished run with another config stops the sweep, naming the key, unless --force
    changed = plan("algorithm.local_epochs=2")
    with pytest.raises(ConfigError, match=r"cosmos\.lam=0 cosmos seed 1 run .*local_epochs = 1"):
        run_sweep(changed, progress=False, echo=lines.append)
    assert calls == []

    # an interrupted run resumes from its checkpoint; without one it alone runs again
    run = tmp_path / "data.num_clients=6" / "cosmos.lam=1" / "cosmos" / "seed1"
    (run / "summary.json").unlink()
    lines.clear()
    run_sweep(plan(), progress=False, echo=lines.append)
    assert calls == [] and "[7/8] resuming from its checkpoint" in lines
    (run / "summary.json").unlink()
    (run / "checkpoint.pt").unlink()
    with pytest.raises(AssertionError, match="recomputed"):
        run_sweep(plan(), progress=False, echo=lines.append)
    # started over in its own folder: forced, since run_experiment refuses recorded rounds
    assert calls == [("cosmos", 6, True)]


def test_sweep_logs_one_tracked_run_per_cell_with_grid_tags(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    store = tmp_path / "mlflow.db"
    axes = [parse_grid("data.num_clients=4,6")]
    plan = plan_sweep(BASE, axes, ["local"], [1], tmp_path / "sw", [f"tracking.mlflow={store}"])
    run_sweep(plan, progress=False, echo=lambda _: None)
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    runs = client.search_runs([client.get_experiment_by_name("cosmosfl").experiment_id])
    tags = sorted((r.data.tags["grid.data.num_clients"], r.info.run_name) for r in runs)
    assert tags == [
        ("4", "sw/data.num_clients=4/local/seed1"),
        ("6", "sw/data.num_clients=6/local/seed1"),
    ]
    assert {r.data.tags["sweep"] for r in runs} == {str(tmp_path / "sw")}
    assert {r.data.params["data.num_clients"] for r in runs} == {"4", "6"}


def test_cli_sweep_runs_reruns_and_reports_errors_in_one_line(tmp_path, capsys, repo_root):
    from cosmosfl.cli.main import main

    out = tmp_path / "sw"
    args = ["sweep", "-c", str(repo_root / "configs" / "default.yaml"), "--grid",
            "data.num_clients=5,6", "-a", "local", "-o", str(out), "-q", "rounds=1",
            "clients.models={mlp: 1}", "local.pretrain_epochs=1"]  # fmt: skip
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "sweep: 2 data.num_clients × 1 algorithms × 1 seeds = 2 runs" in text
    assert "2 runs trained, 0 of 2 skipped (0 already finished" in text and "wrote " in text
    assert (out / "ablation-data.num_clients.png").is_file()
    assert main(args) == 0
    assert "0 runs trained, 2 of 2 skipped (2 already finished" in capsys.readouterr().out
    bad = [*args[:3], "--grid", "data.num_client=5", *args[5:]]
    assert main(bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("cosmosfl: error: --grid data.num_client: unknown key; allowed in data:")
    assert err.count("\n") == 1


def test_a_sweep_split_by_seed_and_algorithm_reports_every_finished_run(tmp_path):
    # Splitting a grid across sessions (one seed, one algorithm per call) must not narrow
    # sweep.yaml to the last call, or the report silently drops the earlier runs.
    axes = [parse_grid("clients.lr=0.001,0.002")]
    run_sweep(plan_sweep(BASE, axes, ["local"], [1, 2], tmp_path, []), progress=False,
              echo=lambda _: None)  # fmt: skip
    run_sweep(plan_sweep(BASE, axes, ["cosmos"], [2], tmp_path, []), progress=False,
              echo=lambda _: None)  # fmt: skip
    doc = yaml.safe_load((tmp_path / "sweep.yaml").read_text())
    assert doc["algorithms"] == ["local", "cosmos"]
    assert doc["seeds"] == [1, 2]
    write_ablation_report(tmp_path)
    report = (tmp_path / "ablation-clients.lr.md").read_text()
    assert "1, 2 (n = 2)" in report  # local's seeds, from the first call
    # A different grid in the same folder replaces the description instead of mixing with it.
    run_sweep(plan_sweep(BASE, [parse_grid("clients.lr=0.001")], ["local"], [3], tmp_path, []),
              progress=False, echo=lambda _: None)  # fmt: skip
    doc = yaml.safe_load((tmp_path / "sweep.yaml").read_text())
    assert (doc["algorithms"], doc["seeds"]) == (["local"], [3])
