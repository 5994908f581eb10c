"""A local Flower deployment for testing: our own SuperLink and SuperNodes on 127.0.0.1.

Every process is started here and stopped here (also on error and Ctrl-C), with the processes
they spawned (ServerApp, ClientApps, SuperExec): `flwr run` against Flower's built-in "local"
SuperLink would leave a detached SuperLink behind. Flower state, logs and the CLI config live
in a private work directory (FLWR_HOME), never in the user's ~/.flwr.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmosfl.apps.flower.netns import PrivateNetwork

CONNECTION = "cosmosfl-local"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flower_env(flwr_home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        FLWR_HOME=str(flwr_home),
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
    )
    return env


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc (Linux); empty elsewhere."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.parent.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


class LocalDeployment:
    """SuperLink + N SuperNodes on 127.0.0.1, insecure unless `tls` (for local testing); with
    `network`, each on its own address of a private virtual network instead."""

    def __init__(
        self,
        work_dir: str | Path,
        num_supernodes: int,
        *,
        log: Callable[[str], None] = print,
        startup_timeout: float = 120.0,
        tls: bool = False,
        supernode_auth: bool = False,
        network: PrivateNetwork | None = None,
        node_configs: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """`tls`: certificates from `certs.write_tls_certificates` secure every connection to
        the SuperLink; `supernode_auth` (needs `tls`): only SuperNodes whose public keys were
        registered with `flwr supernode register` may connect. `network` (netns.py, hosts
        "superlink" and "supernode-0", ...): the SuperLink and the `flwr` CLI run in the
        "superlink" namespace, SuperNode i in "supernode-i"; they reach each other only over
        the network's addresses. `node_configs`: more node-config keys for SuperNode i (e.g.
        `site`, the site file it serves)."""
        if supernode_auth and not tls:
            raise ValueError("SuperNode authentication needs TLS (tls=True)")
        if num_supernodes < 1:
            raise ValueError(f"num_supernodes must be >= 1, got {num_supernodes}")
        self.work = Path(work_dir).resolve()
        self.num_supernodes = num_supernodes
        self.node_configs = [dict(c) for c in node_configs or []]
        if self.node_configs and len(self.node_configs) != num_supernodes:
            raise ValueError(
                f"{len(self.node_configs)} node configs for {num_supernodes} SuperNodes"
            )
        self.log = log
        self.startup_timeout = startup_timeout
        self.flwr_home = self.work / "flwr-home"
        self.env = flower_env(self.flwr_home)
        self.bin = Path(sys.executable).parent
        # Flower spawns its helpers (flower-superexec, flwr-serverapp, ...) by name.
        self.env["PATH"] = os.pathsep.join([str(self.bin), self.env.get("PATH", "")])
        self.port = 0
        self.superlink: subprocess.Popen[bytes] | None = None
        self.supernodes: list[subprocess.Popen[bytes]] = []
        self._started: list[subprocess.Popen[bytes]] = []
        self.tls, self.supernode_auth = tls, supernode_auth
        self.certs = self.work / "certificates"
        self.keys = self.work / "keys"
        self.network = network
        self.link_address = "127.0.0.1" if network is None else network.address("superlink")
        if network is not None:  # fail now, not after the SuperLink started
            for i in range(num_supernodes):
                network.namespace(f"supernode-{i}")

    def _in(self, host: str | None, command: list[str]) -> list[str]:
        """`command` run on `host` of the private network (as is without one)."""
        if self.network is None or host is None:
            return command
        return [*self.network.exec_prefix(host), *command]

    # -- processes ---------------------------------------------------------------------------
    def _spawn(
        self, name: str, args: list[str], host: str | None = None
    ) -> subprocess.Popen[bytes]:
        logfile = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            self._in(host, [str(self.bin / args[0]), *args[1:]]),
            env=self.env,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # our own process group: Ctrl-C reaches us, not them
        )
        logfile.close()
        self._started.append(proc)
        return proc

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.flwr_home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        if self.tls:
            from cosmosfl.apps.flower.certs import write_tls_certificates

            write_tls_certificates(
                self.certs, hosts=tuple(dict.fromkeys(["127.0.0.1", self.link_address]))
            )
            security = [
                "--ssl-ca-certfile",
                str(self.certs / "ca.crt"),
                "--ssl-certfile",
                str(self.certs / "server.pem"),
                "--ssl-keyfile",
                str(self.certs / "server.key"),
            ]
            if self.supernode_auth:
                security.append("--enable-supernode-auth")
        else:
            security = ["--insecure"]
        self.superlink = self._spawn(
            "superlink",
            [
                "flower-superlink",
                *security,
                "--isolation",
                "subprocess",
                "--disable-runtime-dependency-installation",
                "--host",
                # In its own namespace the SuperLink listens on every address it has (its
                # loopback, where Flower's helpers reach it, and the private network's).
                "127.0.0.1" if self.network is None else "0.0.0.0",
                "--port",
                str(self.port),
            ],
            host="superlink",
        )
        self._wait_for_port(self.port, self.superlink, "superlink")
        connection = (
            f'root-certificates = "{self.certs / "ca.crt"}"\n' if self.tls else "insecure = true\n"
        )
        (self.flwr_home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{self.link_address}:{self.port}"\n{connection}'
        )
        for i in range(self.num_supernodes):
            self.supernodes.append(self.add_supernode(f"supernode-{i}", i))
        self.log(
            f"SuperLink on {self.link_address}:{self.port} and {self.num_supernodes} SuperNodes "
            f"(logs in {self.work})"
        )

    def add_supernode(
        self, name: str, partition_id: int, *, register: bool = True, host: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start SuperNode `name` (log: `name`.log) serving `partition_id`, on `host` of the
        network (default: the host called `name`). With SuperNode authentication it gets a key
        pair of its own, registered with the SuperLink unless `register` is False (a node the
        SuperLink must refuse)."""
        args = ["flower-supernode"]
        if self.tls:
            args += ["--root-certificates", str(self.certs / "ca.crt")]
        else:
            args += ["--insecure"]
        if self.supernode_auth:
            from cosmosfl.apps.flower.certs import write_supernode_keys

            private, public = write_supernode_keys(self.keys, name)
            if register:
                self.flwr("supernode", "register", str(public), CONNECTION)
            args += ["--auth-supernode-private-key", str(private)]
        args += [
            "--superlink",
            f"{self.link_address}:{self.port}",
            "--node-config",
            node_config_text(
                {
                    "partition-id": partition_id,
                    "num-partitions": self.num_supernodes,
                    **(self.node_configs[partition_id] if self.node_configs else {}),
                }
            ),
            "--port",
            str(free_port()),
        ]
        return self._spawn(name, args, host=name if host is None else host)

    def _wait_for_port(self, port: int, proc: subprocess.Popen[bytes], name: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.tail(name)}")
            if self._listening(port):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{name} did not listen on port {port} in {self.startup_timeout} s")

    def _listening(self, port: int) -> bool:
        if self.network is None:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        # Only reachable from inside the network: probe from the SuperLink's namespace.
        probe = f"import socket; socket.create_connection(({self.link_address!r}, {port}), 2)"
        done = subprocess.run(
            self._in("superlink", [sys.executable, "-c", probe]), capture_output=True, check=False
        )
        return done.returncode == 0

    def tail(self, name: str, lines: int = 20) -> str:
        path = self.work / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def kill_supernode(self, index: int) -> None:
        """Kill SuperNode `index` and its ClientApps at once (a node lost mid-run)."""
        proc = self.supernodes[index]
        for pid in [*descendants(proc.pid), proc.pid]:
            _signal(pid, signal.SIGKILL)
        proc.wait()

    def all_pids(self) -> list[int]:
        """Every live process started here, with its descendants."""
        pids = []
        for proc in self._started:
            if proc.poll() is None:
                pids.append(proc.pid)
            pids.extend(descendants(proc.pid))
        return [p for p in dict.fromkeys(pids) if _alive(p)]

    def stop(self, grace: float = 10.0) -> None:
        """Stop everything started here, children first collected so none is orphaned."""
        pids = self.all_pids()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            for proc in self._started:
                proc.poll()
            time.sleep(0.2)
        for pid in pids:
            if _alive(pid):
                _signal(pid, signal.SIGKILL)
        for proc in self._started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def __enter__(self) -> LocalDeployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- runs --------------------------------------------------------------------------------
    def flwr(self, *args: str, timeout: float = 120.0) -> str:
        done = subprocess.run(
            self._in("superlink", [str(self.bin / "flwr"), *args]),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"flwr {args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done.stdout

    def submit(self, app_dir: str | Path, run_config: dict[str, Any] | None = None) -> int:
        """`flwr run` the app; returns the run id."""
        args = ["run", str(Path(app_dir).resolve()), CONNECTION, "--format", "json"]
        if run_config:
            import tomli_w

            overrides = self.work / "run-config.toml"
            overrides.write_text(tomli_w.dumps(run_config))
            args += ["--run-config", str(overrides)]
        out = _json_tail(self.flwr(*args))
        if not out.get("success"):
            raise RuntimeError(f"flwr run did not start the run: {out}")
        return int(out["run-id"])

    def status(self, run_id: int) -> str:
        out = _json_tail(self.flwr("ls", CONNECTION, "--run-id", str(run_id), "--format", "json"))
        runs = out.get("runs", [])
        return str(runs[0]["status"]) if runs else "unknown"

    def wait(
        self,
        run_id: int,
        timeout: float,
        poll: float = 2.0,
        on_poll: Callable[[], None] | None = None,
    ) -> str:
        """Wait for the run to finish; returns Flower's final status (e.g. finished:completed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status(run_id)
            if status.startswith("finished"):
                return status
            if on_poll is not None:
                on_poll()
            time.sleep(poll)
        raise TimeoutError(f"run {run_id} did not finish within {timeout:.0f} s")


def node_config_text(config: Mapping[str, Any]) -> str:
    """A SuperNode's `--node-config` value: `key=value` pairs, text quoted as TOML strings."""
    parts = []
    for key, value in config.items():
        if isinstance(value, str):
            if '"' in value:
                raise ValueError(f"node config {key}: {value!r} holds a quote, which Flower splits")
            parts.append(f'{key}="{value.replace(chr(92), chr(92) * 2)}"')  # TOML string
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _json_tail(text: str) -> dict[str, Any]:
    """The JSON object the flwr CLI prints last (it may print log lines before it)."""
    start = text.find("{")
    if start < 0:
        raise RuntimeError(f"no JSON in flwr output: {text[-2000:]}")
    return json.loads(text[start:])
