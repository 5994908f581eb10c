"""Sites that bring their own files, deployed across a private virtual network: the SuperLink
and four SuperNodes in network namespaces of their own, TLS and SuperNode authentication on.
Each site's files (records, site file, its copy of U) exist only inside its own SuperNode's
mount namespace: they are copied there when the node starts and then deleted from the machine,
so the server (and every other site) runs where no site's file exists. Site 3 holds another U
and is refused at discovery; the other three, each with its own framework and its own CSV,
appear in every record. Slow (minutes), Linux and root only:
`python -m pytest -m slow tests/apps/flower/test_flower_sites_netns.py`."""

from __future__ import annotations

import importlib.util
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.app import write_app
from cosmosfl.apps.flower.launch import LocalDeployment, _alive
from cosmosfl.apps.flower.netns import PrivateNetwork, unavailable
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records, read_summary
from cosmosfl.experiment.sites import shared_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SITES = ["hospital-a", "hospital-b", "clinic-c", "clinic-d"]
HOSTS = ["superlink", *(f"supernode-{i}" for i in range(len(SITES)))]
# Bind the node's private copy of its site over the (empty) folder its node config names,
# inside the node's own mount namespace (`ip netns exec` gives each command one), then run it.
PRIVATE = (
    'mkdir -p "$2" && mount -t tmpfs tmpfs "$2" && cp -r "$1"/. "$2" && touch "$3" '
    '&& shift 3 && exec "$@"'
)


def boosted() -> str:
    for name in ("lightgbm", "xgboost"):
        if importlib.util.find_spec(name) is not None:
            return name
    return "hist_gradient_boosting"


class PrivateSites(LocalDeployment):
    """SuperNode i reads its site from a tmpfs only its own mount namespace has."""

    def __init__(self, *args, staging: Path, visible: Path, ready: Path, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.staging, self.visible, self.ready = staging, visible, ready

    def _in(self, host, command):  # type: ignore[no-untyped-def]
        wrapped = super()._in(host, command)
        if host is None or not host.startswith("supernode-"):
            return wrapped
        name = SITES[int(host.split("-")[1])]
        prefix = wrapped[: len(wrapped) - len(command)]
        args = [str(self.staging / name), str(self.visible / name), str(self.ready / name)]
        return [*prefix, "sh", "-c", PRIVATE, "sh", *args, *command]


def test_sites_with_their_own_files_across_a_private_network(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reason = unavailable()
    if reason:
        pytest.skip(f"network namespaces are not available here: {reason}")
    spec = importlib.util.spec_from_file_location("ms", ROOT / "examples/sites/make_sites.py")
    assert spec is not None and spec.loader is not None
    make_sites = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_sites)
    staging, visible, ready = tmp_path / "staging", tmp_path / "sites", tmp_path / "ready"
    make_sites.write(staging, models=["logistic_regression", "mlp", boosted()], scale=0.6)
    # A fourth site, with another public set U (one row short), its own copy in its folder.
    shutil.copytree(staging / "clinic-c", staging / "clinic-d")
    rows = (staging / "public.csv").read_text().splitlines()
    (staging / "clinic-d" / "public.csv").write_text("\n".join(rows[:-1]) + "\n")
    site_d = staging / "clinic-d" / "site.yaml"
    site_d.write_text(
        site_d.read_text()
        .replace("../public.csv", "public.csv")
        .replace(f"model: {boosted()}", "model: random_forest")
    )
    for name in SITES[:3]:  # each site's own copy of U inside its folder
        shutil.copy(staging / "public.csv", staging / name / "public.csv")
        site = staging / name / "site.yaml"
        site.write_text(site.read_text().replace("../public.csv", "public.csv"))
    server = tmp_path / "server"  # what the coordinator holds: U and the run config
    server.mkdir()
    shutil.copy(staging / "public.csv", server / "public.csv")
    run_yaml = (
        (staging / "run.yaml")
        .read_text()
        .replace(
            "files: [hospital-a/site.yaml, hospital-b/site.yaml, clinic-c/site.yaml]", "files: []"
        )
    )
    (server / "run.yaml").write_text(run_yaml)
    cfg = load_config(
        server / "run.yaml",
        [
            f"sites.public={server / 'public.csv'}",
            "data.num_clients=4",
            "rounds=2",
            "threads=1",
            "algorithm.pretrain_epochs=2",
            "algorithm.local_epochs=1",
        ],
    )
    cfg = shared_config(cfg)
    out = tmp_path / "run"
    app = write_app(tmp_path / "app", cfg, out=str(out), **{"reply-timeout": 300.0}).parent
    for name in SITES:
        (visible / name).mkdir(parents=True)
    ready.mkdir()
    nodes = [{"site": str(visible / name / "site.yaml")} for name in SITES]
    with PrivateNetwork(HOSTS) as net:
        dep = PrivateSites(
            tmp_path / "work",
            len(SITES),
            tls=True,
            supernode_auth=True,
            network=net,
            node_configs=nodes,
            staging=staging,
            visible=visible,
            ready=ready,
        )
        with dep:
            deadline = time.monotonic() + 120
            while len(list(ready.iterdir())) < len(SITES):
                assert time.monotonic() < deadline, "SuperNodes did not copy their sites"
                time.sleep(0.5)
            shutil.rmtree(staging)  # no site's file exists on the machine any more
            assert all(not any((visible / n).iterdir()) for n in SITES)
            status = dep.wait(dep.submit(app), timeout=1800)
            started = dep.all_pids()
            link_log = dep.tail("superlink", 10_000)
    assert status == "finished:completed", link_log[-3000:]
    records = read_records(out)
    assert [r["round"] for r in records] == [1, 2]
    for record in records:  # every site that joined, in every record
        assert set(record["accuracy"]["cluster_model"]) == {"0", "1", "2"}
        assert record["missing"] == [] and record["rejected"] == []
    summary = read_summary(out)
    assert list(summary["clients_refused"]) == ["3"]
    assert "SHA-256" in summary["clients_refused"]["3"]
    assert summary["client_models"] == {"0": "logistic_regression", "1": "mlp", "2": boosted()}
    assert "adjusted_rand_index" not in summary
    assert not [pid for pid in started if _alive(pid)], "processes left behind"
