"""The tutorials in docs/tutorials do what they say: every Python block runs, in order, as one
script; every shell command runs or is checked as the page says (tests/test_readme.py does
the same for README's example)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from cosmosfl.cli.main import build_parser, main, parse_args
from cosmosfl.cli.options import config_args
from cosmosfl.experiment.config import load_config
from cosmosfl.testing import CHECKS

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)
ALL_CHECKS = list(CHECKS)  # every check passes, none skipped


def blocks(page: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (TUTORIALS / page).read_text(), flags=re.S)


def commands(page: str) -> list[str]:
    """The shell commands of a page's bash blocks, continuation lines joined."""
    lines = []
    for block in blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = " ".join(line.split())
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def run_python(page: str) -> dict:
    namespace: dict = {"__name__": "__tutorial__"}
    for block in blocks(page, "python"):
        exec(compile(block, str(TUTORIALS / page), "exec"), namespace)
    return namespace


def check_pip(line: str) -> None:
    """`pip install` lines are not run here (they would install); their extras must exist."""
    assert line.startswith("pip install "), line
    for extras in re.findall(r"cosmosfl\[([a-z,]+)\]", line):
        assert set(extras.split(",")) <= EXTRAS, line


def cosmosfl_in_process(line: str, capsys) -> tuple[int, str, str]:
    argv = shlex.split(os.path.expandvars(line))
    assert argv[0] == "cosmosfl", line
    code = main(argv[1:])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- bring your own model ------------------------------------------------------------------------
def test_own_model_tutorial(tmp_path, monkeypatch, capsys):
    assert not blocks("own-model.md", "bash")
    monkeypatch.chdir(tmp_path)
    ns = run_python("own-model.md")
    assert ns["report"].passed == ALL_CHECKS and not ns["report"].skipped
    kinds = {type(c.learner).__name__ for c in ns["clients"]}
    assert kinds == {"TorchLearner", "SklearnLearner", "NumpySoftmax"}
    result = ns["result"]
    assert set(result.clusters) == set(range(10)) and len(result.records) == 2
    assert result.mean_accuracy() > 0.6 and result.mean_accuracy("client_model") > 0.6
    out = capsys.readouterr().out
    assert "two learners built with seed 0 predict differently" in out  # the unseeded forest
    assert (tmp_path / "runs" / "own-model" / "summary.json").is_file()
    # the learner passes when its own tests call check_learner on it with user data
    from cosmosfl.testing import check_learner

    x, y = ns["x_train"][:200], ns["ds"].y_train[:200]
    assert check_learner(lambda seed: ns["NumpySoftmax"](10, seed=seed), x, y).passed == ALL_CHECKS


# -- tabular data with mixed frameworks ---------------------------------------------------------
def test_tabular_tutorial(tmp_path, monkeypatch, capsys):
    pytest.importorskip("xgboost", reason="the tabular tutorial needs `pip install .[xgboost]`")
    pytest.importorskip("lightgbm", reason="the tabular tutorial needs `pip install .[lightgbm]`")
    # Its commands name a preset and a table in --data-dir: each resolves to a valid config;
    # the per-framework table is redrawn from the kept runs in results/satellite.
    seen = set()
    for line in commands("tabular.md"):
        argv = shlex.split(line)
        if argv[0] == "python":
            script, folder = argv[1], argv[2]
            assert script == "benchmarks/framework_gains.py" and folder == "runs/satellite", line
            proc = subprocess.run(
                [sys.executable, script, "results/satellite", *argv[3:]],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
            assert "| cosmos (client_model) | lightgbm |" in proc.stdout
            seen.add("gains")
            continue
        assert argv[0] == "cosmosfl" and argv[1] in ("run", "compare"), line
        options = [a for a in argv[2:] if a not in ("--algorithms", "--seeds", "--out")]
        options = [a for a in options if not re.fullmatch(r"[a-z,]+|[0-9,]+|runs/\S+", a)]
        code, out, err = cosmosfl_in_process(
            " ".join(["cosmosfl", "show-config", *options]), capsys
        )
        assert code == 0, (line, err)
        assert "satellite" in out
        seen.add(argv[1])
    assert seen == {"run", "compare", "gains"}
    monkeypatch.chdir(tmp_path)
    ns = run_python("tabular.md")
    assert ns["ds"].kind == "vectors" and ns["ds"].x_train.shape[1] == 64
    kinds = {type(c.learner).__name__ for c in ns["clients"]}
    assert kinds == {"TorchLearner", "SklearnLearner", "XGBoostLearner", "LightGBMLearner"}
    result = ns["result"]
    assert len(result.records) == 2 and set(result.clusters) == set(range(10))
    # Digits' ten classes in five groups of two: the cluster models are far above chance.
    assert result.mean_accuracy() > 0.6 and result.mean_accuracy("client_model") > 0.6


# -- reproduce the paper on a GPU ----------------------------------------------------------------
def synthetic_cifar10(folder: Path) -> Path:
    """A stand-in for cifar10.npz with CIFAR-10's shapes: 600 training and 250 test images."""
    rng = np.random.default_rng(0)
    prototypes = rng.integers(0, 256, (10, 32, 32, 3))

    def images(labels: np.ndarray) -> np.ndarray:
        noisy = prototypes[labels] + rng.normal(0, 40, (len(labels), 32, 32, 3))
        return np.clip(noisy, 0, 255).astype(np.uint8)

    y_train, y_test = np.arange(600) % 10, np.arange(250) % 10
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(
        folder / "cifar10.npz",
        x_train=images(y_train),
        y_train=y_train.astype(np.int64),
        x_test=images(y_test),
        y_test=y_test.astype(np.int64),
    )
    return folder


def test_paper_on_gpu_tutorial(tmp_path, monkeypatch, capsys):
    """Every command runs on a CPU with synthetic data; `device=cuda` runs and comparisons stop
    at the device check, after their preset, config and data were checked."""
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATA", str(synthetic_cifar10(tmp_path / "data")))
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    lines = commands("paper-on-gpu.md")
    seen = set()
    for line in lines:
        if line.startswith("pip install"):
            check_pip(line)
            continue
        if line.startswith("export DATA="):
            continue  # the test's DATA: the synthetic stand-in
        if line.startswith("python -c"):
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
            proc = subprocess.run(line, shell=True, capture_output=True, text=True, env=env)
            assert proc.returncode == 0 and proc.stdout.strip() in ("True", "False"), proc.stderr
            continue
        code, out, err = cosmosfl_in_process(line, capsys)
        command = line.split()[1]
        seen.add(command)
        if "device=cuda" in line and command in ("run", "compare"):
            assert code == 2 and "no CUDA device is available" in err, (line, err)
            if command == "compare":
                assert "cosmos" in out and "fedmd" in out  # the plan was printed and valid
        else:
            assert code == 0, (line, err)
    assert seen == {"presets", "show-config", "partition", "run", "compare"}
    assert (tmp_path / "split.png").stat().st_size > 1000
    ns = run_python("paper-on-gpu.md")
    summary = ns["summary"]
    assert summary["reported_model"] == "cluster_model" and summary["rounds"] == 1
    assert summary["num_clients"] == 25 and summary["dataset"] == "cifar10"
    config = (tmp_path / "runs" / "rehearsal" / "config.yaml").read_text()
    assert "mobilenetv2" in config and "squeezenet" in config and "server_model: vgg16" in config


# -- Flower with TLS -----------------------------------------------------------------------------
@functools.cache
def flower_help(*program: str) -> str:
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(
        [str(bin_dir / program[0]), *program[1:], "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200", "FLWR_HOME": os.environ.get("FLWR_HOME", "/tmp")},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def check_flower_command(line: str) -> None:
    """Flower's programs are not started here: each option the page gives must be one that
    program (or `flwr` subcommand) accepts."""
    argv = shlex.split(line)
    program = tuple(argv[:3]) if argv[0] == "flwr" and argv[1] == "supernode" else tuple(argv[:1])
    if argv[0] == "flwr" and argv[1] != "supernode":
        program = tuple(argv[:2])
    text = flower_help(*program)
    for option in (a.split("=")[0] for a in argv if a.startswith("--")):
        assert re.search(rf"{re.escape(option)}\b", text), f"{' '.join(program)} has no {option}"


@pytest.fixture
def flower_tutorial(tmp_path, monkeypatch):
    pytest.importorskip("flwr", reason="the Flower tutorial needs `pip install .[flower]`")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))  # the page's $PWD
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    return tmp_path


def test_flower_tls_tutorial(flower_tutorial, capsys):
    from cryptography import x509

    tmp = flower_tutorial
    ns = run_python("flower-tls.md")
    ca = x509.load_pem_x509_certificate((tmp / "certificates" / "ca.crt").read_bytes())
    server = ns["server"]
    server.verify_directly_issued_by(ca)  # signed by the CA the clients trust
    names = {str(n.value) for n in ns["names"]}
    assert {"superlink.example.org", "192.0.2.10"} <= names
    assert oct((tmp / "certificates" / "server.key").stat().st_mode & 0o777) == "0o600"
    assert len(list((tmp / "keys").glob("supernode-*.pub"))) == 10
    printed = capsys.readouterr().out
    assert "supernode-0 ecdsa-sha2-nistp384" in printed

    (toml,) = blocks("flower-tls.md", "toml")
    connection = tomllib.loads(toml)["superlink"]
    assert connection["default"] == "secure" and "insecure" not in connection["secure"]
    assert connection["secure"]["address"].endswith(":9093")

    seen = set()
    for line in commands("flower-tls.md"):
        if line.startswith("pip install"):
            check_pip(line)
        elif line.startswith("export "):
            assert all("=" in a for a in shlex.split(line)[1:])
        elif line.startswith("cosmosfl flower local"):
            # a deployment: run by the slow test below; here parsed and its config validated
            args = parse_args(build_parser(), shlex.split(line)[1:])
            assert (
                args.tls
                and args.supernode_auth
                and load_config(**config_args(args)).data.num_clients == 2
            )
            seen.add("local")
        elif line.startswith("cosmosfl "):
            code, _, err = cosmosfl_in_process(line, capsys)
            assert code == 0, err
            seen.add(line.split()[2])
        else:
            check_flower_command(line)
            seen.add(line.split()[0] if line.startswith("flower") else " ".join(line.split()[:2]))
    assert seen == {
        "local",
        "app",
        "flower-superlink",
        "flwr supernode",
        "flower-supernode",
        "flwr run",
    }
    app = (tmp / "my-app" / "pyproject.toml").read_text()
    assert f'out = "{tmp}/runs/tls-demo"' in app
    assert "cosmosfl.apps.flower.server_app:app" in app


@pytest.mark.slow
def test_flower_tls_rehearsal_runs(flower_tutorial, capsys):
    """The one-machine rehearsal, exactly as the page gives it (minutes: Flower processes)."""
    (line,) = [c for c in commands("flower-tls.md") if c.startswith("cosmosfl flower local")]
    code, out, err = cosmosfl_in_process(line, capsys)
    assert code == 0, err
    assert "finished:completed" in out
    assert (flower_tutorial / "runs" / "tls-rehearsal" / "summary.json").is_file()
    assert (flower_tutorial / "tls-work" / "keys" / "supernode-1.pub").is_file()


# -- deploying across organisations ---------------------------------------------------------------
ORGANISATIONS = "organisations.md"


def organisations_script() -> str:
    """The page's shell blocks as one script, in order (pip lines are not run here)."""
    lines = []
    for block in blocks(ORGANISATIONS, "bash"):
        lines += [x for x in block.splitlines() if not x.startswith("pip install")]
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def test_organisations_tutorial(flower_tutorial, capsys):
    """Fast checks of the page: its example files are the ones it shows, its cosmosfl commands
    parse, and every option it gives Flower's programs exists (the slow test runs it all)."""
    import yaml

    tmp = flower_tutorial
    seen = set()
    for line in commands(ORGANISATIONS):
        if line.startswith("pip install"):
            check_pip(line)
        elif line.startswith("cosmosfl "):
            args = parse_args(build_parser(), shlex.split(line)[1:])
            seen.add(args.command if args.command != "flower" else args.flower_command)
        elif line.startswith(("flower-", "flwr ")):
            check_flower_command(line.split(">")[0].rstrip(" &"))
            seen.add(line.split()[0])
    assert {"run", "local", "app", "report", "flower-superlink", "flower-supernode", "flwr"} <= seen
    make = [c for c in commands(ORGANISATIONS) if c.startswith("python examples/sites/")]
    (tmp / "examples").symlink_to(ROOT / "examples")  # the page runs in a checkout
    subprocess.run([sys.executable, *shlex.split(make[0])[1:]], cwd=tmp, check=True)
    site, run = blocks(ORGANISATIONS, "yaml")
    shown = yaml.safe_load(site.replace("  # ... 2 to 9\n", ""))
    written = yaml.safe_load((tmp / "org" / "clinic-c" / "site.yaml").read_text())
    assert {k: v for k, v in written.items() if k != "label_map"} == {
        k: v for k, v in shown.items() if k != "label_map"
    }
    assert shown["label_map"].items() <= written["label_map"].items()
    assert yaml.safe_load(run) == yaml.safe_load((tmp / "org" / "run.yaml").read_text())
    (text,) = blocks(ORGANISATIONS, "text")
    assert "every party must hold the same U file" in text  # the message the code gives


@pytest.mark.slow
def test_organisations_tutorial_runs(flower_tutorial):
    """Every command of the page, in order, as one bash script: the example, the in-process
    try-out, the TLS rehearsal, certificates, the app, a SuperLink with authentication, three
    SuperNodes naming their site files, COSMOS and `local` runs, the report."""
    import contextlib
    import json
    import signal

    tmp = flower_tutorial
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    script = tmp / "tutorial.sh"
    script.write_text(organisations_script())
    (tmp / "examples").symlink_to(ROOT / "examples")  # the page runs in a checkout
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp,
        env={**env, "PWD": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # the page's background processes: one group to stop
    )
    try:
        out, _ = proc.communicate(timeout=1800)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-6000:]
    org = tmp / "org"
    summary = json.loads((org / "runs/org/cosmos/seed1/summary.json").read_text())
    assert summary["engine"] == "flower" and summary["clients_refused"] == {}
    assert summary["client_models"] == {"0": "random_forest", "1": "mlp", "2": "lightgbm"}
    assert (org / "runs/org/local/seed1/summary.json").is_file()
    for name in ("table.md", "client-gains.md", "client-gains.png", "curves.png"):
        assert (org / "runs/org" / name).is_file(), name
    assert "lightgbm" in (org / "runs/org/client-gains.md").read_text()
    tried, rehearsed = (
        json.loads((org / "runs" / name / "summary.json").read_text())["final_round"]["accuracy"]
        for name in ("try", "rehearsal")
    )
    assert tried == rehearsed  # "Both give the same accuracies", as the page says
