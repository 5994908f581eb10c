"""Sites that bring their own files on Flower: the ServerApp (`run_on_grid`, U and the run
config only) over the real ClientApp (loopback Grid), each node naming its site file in its
node config, gives the records of the same sites run in-process; a site holding another U, or
labels outside the run's set, is refused at discovery and the run goes on without it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.client_app import make_client_app
from cosmosfl.apps.flower.server_app import run_on_grid
from cosmosfl.engines.progress import SilentReporter
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records, read_summary
from cosmosfl.experiment.runner import run_experiment
from cosmosfl.experiment.sites import shared_config

from .loopback import LoopbackGrid, ServerGrid
from .test_flower_engine import settings_for
from .test_flower_faults import assert_same_records

SITE_NAMES = ("hospital-a", "hospital-b", "clinic-c")
SMALL_SITES = ["rounds=2", "threads=1", "algorithm.pretrain_epochs=2", "algorithm.local_epochs=1"]


def site_nodes(root: Path) -> list[dict[str, Any]]:
    return [{"site": str(root / n / "site.yaml")} for n in ("hospital-a", "hospital-b", "clinic-c")]


def on_flower(cfg, nodes: list[dict[str, Any]], out: Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Run the shared config (no site files in it) over the loopback; the nodes name sites."""
    shared = shared_config(cfg)
    assert shared.sites.files == [] and shared.sites.public_sha256
    grid = LoopbackGrid(make_client_app(settings_for(shared)), len(nodes), nodes)
    run_on_grid(ServerGrid(grid), shared, settings_for(shared, str(out)), reporter=SilentReporter())
    return read_summary(out)


def test_sites_on_flower_give_the_in_process_records(tmp_path, sites_root) -> None:  # type: ignore[no-untyped-def]
    root = sites_root
    cfg = load_config(root / "run.yaml", SMALL_SITES)
    inproc = run_experiment(cfg, tmp_path / "inproc", progress=False)
    summary = on_flower(cfg, site_nodes(root), tmp_path / "flower")
    assert_same_records(read_records(tmp_path / "flower"), inproc.records)
    assert summary["client_models"] == {
        "0": "logistic_regression",
        "1": "mlp",
        "2": "random_forest",
    }
    assert summary["clients_refused"] == {} and summary["clients_never_connected"] == []
    assert summary["partition"] == "sites" and "adjusted_rand_index" not in summary


def test_a_site_with_another_public_set_is_refused_and_the_others_run(tmp_path, sites_root) -> None:  # type: ignore[no-untyped-def]
    root = sites_root
    other = root / "clinic-c" / "public.csv"
    text = (root / "public.csv").read_text().splitlines()
    other.write_text("\n".join(text[:-1]) + "\n")  # one row short: another U
    (root / "clinic-c" / "site.yaml").write_text(
        (root / "clinic-c" / "site.yaml").read_text().replace("../public.csv", "public.csv")
    )
    cfg = load_config(root / "run.yaml", [*SMALL_SITES, "rounds=1"])
    summary = on_flower(cfg, site_nodes(root), tmp_path / "flower")
    assert list(summary["clients_refused"]) == ["2"]
    assert "SHA-256" in summary["clients_refused"]["2"]
    records = read_records(tmp_path / "flower")
    assert all(set(r["accuracy"]["local"]) == {"0", "1"} for r in records)


def test_a_site_with_labels_outside_the_set_is_refused(tmp_path, sites_root) -> None:  # type: ignore[no-untyped-def]
    root = sites_root
    site = root / "hospital-a" / "records.csv"
    site.write_text(site.read_text().replace(",zero\n", ",nul\n"))
    cfg = load_config(root / "run.yaml", [*SMALL_SITES, "rounds=1"])
    summary = on_flower(cfg, site_nodes(root), tmp_path / "flower")
    assert list(summary["clients_refused"]) == ["0"]
    assert (
        "'nul'" in summary["clients_refused"]["0"]
        and "label_map" in summary["clients_refused"]["0"]
    )


def test_the_server_opens_no_site_file(tmp_path, sites_root) -> None:  # type: ignore[no-untyped-def]
    """The shared config names no site file, and building the server's experiment reads only U
    (the sites' files are moved where only their nodes' configs point)."""
    from cosmosfl.experiment.build import build_experiment

    root = sites_root
    cfg = shared_config(load_config(root / "run.yaml", SMALL_SITES))
    for name in ("hospital-a", "hospital-b", "clinic-c"):
        (root / name).rename(tmp_path / name)
    exp = build_experiment(cfg, clients=[])
    assert exp.clients == [] and exp.client_ids == [0, 1, 2] and exp.num_classes == 10
    assert dataclasses.asdict(cfg.sites)["files"] == []


def test_flower_app_writes_the_shared_config(tmp_path, sites_root, capsys) -> None:  # type: ignore[no-untyped-def]
    import tomllib

    import yaml

    from cosmosfl.cli.main import main
    from cosmosfl.data.public import file_sha256

    assert main(["flower", "app", "-c", "run.yaml", "--dir", str(tmp_path / "app")]) == 0
    app = tomllib.loads((tmp_path / "app" / "pyproject.toml").read_text())
    embedded = yaml.safe_load(app["tool"]["flwr"]["app"]["config"]["config"])
    assert embedded["sites"]["public_sha256"] == file_sha256(sites_root / "public.csv")
    assert embedded["sites"]["files"] == [] and embedded["data"]["num_clients"] == 3
    assert "site=" in capsys.readouterr().out  # how to start a site's SuperNode


def test_flower_local_starts_one_supernode_per_site_file(sites_root) -> None:  # type: ignore[no-untyped-def]
    from cosmosfl.cli.flower import _local_sites
    from cosmosfl.experiment.config import ConfigError

    cfg = load_config(sites_root / "run.yaml")
    shared, nodes = _local_sites(cfg, [])
    assert nodes == [{"site": str(sites_root / n / "site.yaml")} for n in SITE_NAMES]
    assert shared.sites.files == []
    shared, nodes = _local_sites(cfg, ["hospital-b/site.yaml", "clinic-c/site.yaml"])
    assert len(nodes) == 2 and shared.data.num_clients == 2
    with pytest.raises(ConfigError, match=r"--site needs a config with sites\.public"):
        _local_sites(load_config(None), ["hospital-a/site.yaml"])
