"""A Flower deployment across a private virtual network: the SuperLink and three SuperNodes
in network namespaces of their own, on different addresses, with TLS (a certificate for the
SuperLink's address) and SuperNode authentication. Slow (minutes), Linux and root only:
`python -m pytest -m slow tests/apps/flower/test_flower_netns.py`."""

from __future__ import annotations

import socket
import subprocess

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs `pip install .[flower]`")

from cosmosfl.apps.flower.app import write_app
from cosmosfl.apps.flower.launch import LocalDeployment, _alive
from cosmosfl.apps.flower.netns import PrivateNetwork, unavailable
from cosmosfl.experiment.config import load_config
from cosmosfl.experiment.rundir import read_records

from ...engines.flower.test_flower_engine import SMALL

pytestmark = pytest.mark.slow

HOSTS = ["superlink", "supernode-0", "supernode-1", "supernode-2", "intruder"]


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}


def _peers(net: PrivateNetwork) -> set[str]:
    """Addresses with a TCP connection to the SuperLink, seen from inside its namespace."""
    shown = subprocess.run(
        [*net.exec_prefix("superlink"), "ss", "-tnH", "state", "established"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[-1].rsplit(":", 1)[0] for line in shown.stdout.splitlines()}


def test_two_cosmos_rounds_over_a_private_network_with_tls_and_authentication(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reason = unavailable()
    if reason:
        pytest.skip(f"network namespaces are not available here: {reason}")
    cfg = load_config(
        None, [*SMALL, "data.num_clients=3", "clients.models=[mlp,cnn,mlp]", "rounds=2"]
    )
    out = tmp_path / "run"
    app = write_app(tmp_path / "app", cfg, out=str(out), **{"reply-timeout": 300.0}).parent
    before = _namespaces()
    peers: set[str] = set()
    with PrivateNetwork(HOSTS) as net:
        made = set(net.namespaces())
        assert len(made) == len(HOSTS) + 1 and made.isdisjoint(before)
        dep = LocalDeployment(tmp_path / "work", 3, tls=True, supernode_auth=True, network=net)
        with dep:
            # A SuperNode whose key the SuperLink never saw, on an address of its own.
            intruder = dep.add_supernode("intruder", 0, register=False)
            status = dep.wait(
                dep.submit(app), timeout=1800, on_poll=lambda: peers.update(_peers(net))
            )
            started = dep.all_pids()
            intruder_log = dep.tail("intruder", 400)
            link_log = dep.tail("superlink", 10_000)
            intruder_exit = intruder.poll()
            # Not reachable from the machine's own namespace: the network is private.
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((net.address("superlink"), dep.port)) != 0
        link = net.address("superlink")
    assert status == "finished:completed"
    records = read_records(out)
    assert [r["round"] for r in records] == [1, 2]
    for record in records:
        assert set(record["accuracy"]["cluster_model"]) == {"0", "1", "2"}
        assert record["missing"] == [] and record["rejected"] == []
    # The members reached the SuperLink from their own addresses, over the network.
    nodes = {net.address(f"supernode-{i}") for i in range(3)}
    assert nodes <= peers, f"SuperLink peers seen: {sorted(peers)}"
    assert link.startswith(net.subnet)
    # The unregistered node reached the SuperLink, was refused for its key, and gave up.
    assert "No SuperNode found with the given public key" in link_log
    assert "Failed to activate SuperNode" in intruder_log, intruder_log
    assert intruder_exit is not None, "the refused SuperNode is still running"
    # Nothing left behind: processes, namespaces (and with them every interface made).
    assert not [pid for pid in started if _alive(pid)], "processes left behind"
    assert _namespaces().isdisjoint(made)
