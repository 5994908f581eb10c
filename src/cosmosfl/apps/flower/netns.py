"""A private virtual network of Linux network namespaces, for testing a Flower deployment
across real addresses instead of 127.0.0.1.

Each host gets its own namespace with one interface (`eth0`) on a /24 subnet; the interfaces
meet on a bridge that lives in a namespace of its own, so nothing is added to the machine's
own network namespace and no traffic leaves the namespaces created here. Needs Linux, root and
iproute2 (`ip netns`); `unavailable()` says why not where they are missing. Everything created
is removed on exit, also after an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence

SUBNET = "10.231.0"


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can (made and removed once)."""
    if not shutil.which("ip"):
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"cflprobe{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, check=False)
    return None


class PrivateNetwork:
    """Namespaces named after `hosts`, addressed SUBNET.1, .2, ... in that order.

    >>> with PrivateNetwork(["server", "client"]) as net:  # doctest: +SKIP
    ...     subprocess.run([*net.exec_prefix("client"), "ping", "-c1", net.address("server")])
    """

    def __init__(self, hosts: Sequence[str], subnet: str = SUBNET) -> None:
        if not hosts or len(set(hosts)) != len(hosts):
            raise ValueError(f"hosts must be distinct names, got {list(hosts)}")
        if len(hosts) > 250:
            raise ValueError(f"at most 250 hosts on one /24 subnet, got {len(hosts)}")
        self.hosts = list(hosts)
        self.subnet = subnet
        # Unique per network: two test processes never share (or delete) each other's names.
        self.tag = f"cfl{uuid.uuid4().hex[:8]}"
        self.bridge_ns = f"{self.tag}-net"
        self._made: list[str] = []

    def namespace(self, host: str) -> str:
        if host not in self.hosts:
            raise KeyError(f"no host {host!r} on this network (hosts: {self.hosts})")
        return f"{self.tag}-{host}"

    def address(self, host: str) -> str:
        self.namespace(host)
        return f"{self.subnet}.{self.hosts.index(host) + 1}"

    def exec_prefix(self, host: str) -> list[str]:
        """The command prefix that runs a program inside `host`'s namespace (same pid: `ip`
        execs the program)."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def namespaces(self) -> list[str]:
        """The namespaces this network created and has not removed yet."""
        return list(self._made)

    def _ip(self, *args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")

    def create(self) -> None:
        try:
            self._add_namespace(self.bridge_ns)
            self._ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            self._ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                ns = self.namespace(host)
                self._add_namespace(ns)
                # Both ends are made directly in their namespaces: the machine's own namespace
                # never sees them.
                port = f"p{i}"
                self._ip(
                    "link", "add", port, "netns", self.bridge_ns, "type", "veth",
                    "peer", "name", "eth0", "netns", ns,
                )  # fmt: skip
                self._ip("-n", self.bridge_ns, "link", "set", port, "master", "br0", "up")
                self._ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.remove()
            raise

    def _add_namespace(self, ns: str) -> None:
        self._ip("netns", "add", ns)
        self._made.append(ns)
        # Loopback up: Flower's own helpers talk to their parent process on 127.0.0.1.
        self._ip("-n", ns, "link", "set", "lo", "up")

    def remove(self) -> None:
        """Delete every namespace made here (their interfaces go with them)."""
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
        self._made.clear()

    def __enter__(self) -> PrivateNetwork:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
