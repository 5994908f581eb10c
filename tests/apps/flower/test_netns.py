"""PrivateNetwork's bookkeeping (no namespace is made here; the deployment across one is
tests/apps/flower/test_flower_netns.py, slow)."""

from __future__ import annotations

import pytest

from cosmosfl.apps.flower import netns
from cosmosfl.apps.flower.netns import PrivateNetwork


def test_hosts_get_their_own_namespace_and_address_in_order() -> None:
    net = PrivateNetwork(["superlink", "supernode-0", "supernode-1"])
    assert [net.address(h) for h in net.hosts] == ["10.231.0.1", "10.231.0.2", "10.231.0.3"]
    names = {net.namespace(h) for h in net.hosts}
    assert len(names) == 3 and all(n.startswith(net.tag) for n in names)
    assert net.exec_prefix("supernode-1") == ["ip", "netns", "exec", net.namespace("supernode-1")]
    assert net.namespaces() == []  # nothing made before create()


def test_two_networks_never_share_names() -> None:
    a, b = PrivateNetwork(["x"]), PrivateNetwork(["x"])
    assert a.namespace("x") != b.namespace("x") and a.bridge_ns != b.bridge_ns


@pytest.mark.parametrize("hosts", [[], ["a", "a"], [f"h{i}" for i in range(251)]])
def test_bad_host_lists_are_refused(hosts: list[str]) -> None:
    with pytest.raises(ValueError, match="hosts"):
        PrivateNetwork(hosts)


def test_an_unknown_host_is_named_in_the_error() -> None:
    net = PrivateNetwork(["superlink"])
    with pytest.raises(KeyError, match="supernode-0"):
        net.address("supernode-0")


def test_unavailable_says_why_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns.shutil, "which", lambda name: "/usr/sbin/ip")
    assert netns.unavailable() == "creating network namespaces needs root"
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    assert "not installed" in (netns.unavailable() or "")


def test_a_failed_step_removes_what_was_made(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    class Done:
        def __init__(self, code: int) -> None:
            self.returncode, self.stderr = code, "RTNETLINK answers: Operation not permitted"

    def fake_run(cmd: list[str], **kw: object) -> Done:
        calls.append(cmd)
        # The bridge's namespace is made; making the bridge itself fails.
        return Done(1 if cmd[3:6] == ["link", "add", "br0"] else 0)

    monkeypatch.setattr(netns.subprocess, "run", fake_run)
    net = PrivateNetwork(["superlink"])
    with pytest.raises(RuntimeError, match="Operation not permitted"):
        net.create()
    assert ["ip", "netns", "delete", net.bridge_ns] in calls
    assert net.namespaces() == []
