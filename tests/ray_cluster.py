"""A real two-node Ray cluster on this machine, for tests and benchmarks.

``with RayCluster([{"wa-a": 1}, {"wa-b": 1}]) as cluster:`` runs ``ray start --head`` (the first
node's custom resources) and ``ray start --address=...`` for each further node, all with
``--num-cpus 1``, no dashboard, free ports and a private ``--temp-dir`` (Ray writes to ``/tmp/ray``
otherwise). ``cluster.address`` is the head's ``HOST:PORT``. Every process the cluster starts carries
``MARKER=<uuid>`` in its environment; on exit they are stopped by PID (never ``ray stop``, which would
stop other users' clusters too) and the temp dir is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

__all__ = ["MARKER", "RayCluster", "marked_pids"]

MARKER = "CDP_RAY_TEST_MARKER"
START_ATTEMPTS = 3
REGISTER_WAIT_S = 240
BOOT = f"""
import sys, time
import ray._private.services as services
asked = services.get_node

def patient_get_node(gcs_address, node_id):  # Ray waits 30 s at most (a constant): a loaded machine needs more
    deadline = time.monotonic() + {REGISTER_WAIT_S}
    while True:
        try:
            return asked(gcs_address, node_id)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)

services.get_node = patient_get_node
from ray.scripts.scripts import main
sys.argv[0] = "ray"
main()
"""
"""``ray start``, with Ray's node-registration wait wrapped from our side (never edited)."""


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            sockets.append(probe)
        return [int(probe.getsockname()[1]) for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def marked_pids(marker: str) -> list[int]:
    """Live (non-zombie) processes whose environment has ``MARKER=marker``."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


class RayCluster:
    def __init__(
        self, nodes: list[dict[str, float]], *, num_cpus: int = 1, env: dict[str, str] | None = None
    ) -> None:
        self.nodes = nodes
        self.num_cpus = num_cpus
        self.marker = uuid.uuid4().hex
        self.env = dict(env or {})
        self.temp_dir = Path(
            tempfile.mkdtemp(prefix="ray-", dir="/tmp")
        )  # Ray's socket paths must stay short
        self.address = ""

    def _environ(self) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        # A loaded machine starts the dashboard agent slowly; the raylet waits for its port this long.
        # A test cluster on loopback: no token to hand to each driver (Ray's token auth is on by default).
        slow_start = {"RAY_agent_register_timeout_ms": "300000", "RAY_AUTH_MODE": "disabled"}
        return environ | slow_start | self.env | {MARKER: self.marker, "RAY_USAGE_STATS_ENABLED": "0"}

    def _start_node(self, resources: dict[str, float], head: bool) -> None:
        ports = _free_ports(8)
        command = [
            sys.executable,
            "-c",
            BOOT,
            "start",
            f"--num-cpus={self.num_cpus}",
            f"--resources={json.dumps(resources)}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
            f"--node-manager-port={ports[1]}",
            f"--object-manager-port={ports[2]}",
            f"--dashboard-agent-listen-port={ports[3]}",
            f"--dashboard-agent-grpc-port={ports[4]}",
            f"--runtime-env-agent-port={ports[5]}",
            f"--metrics-export-port={ports[6]}",
            "--node-ip-address=127.0.0.1",
        ]
        if head:
            command += [
                f"--port={ports[0]}",
                "--head",
                "--include-dashboard=false",
                f"--ray-client-server-port={ports[7]}",
            ]
        else:
            command += [f"--address={self.address}"]
        log = self.temp_dir / "ray-start.log"  # not a pipe: the daemons it starts would hold it open
        for attempt in range(1, START_ATTEMPTS + 1):
            with open(log, "w") as out:
                run = subprocess.run(
                    command,
                    env=self._environ(),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=600,
                    check=False,
                )
            if run.returncode == 0:
                if head:
                    self.address = f"127.0.0.1:{ports[0]}"
                return
            if attempt == START_ATTEMPTS:
                raise RuntimeError(f"ray start failed: {log.read_text()[-2000:]}")
            if head:
                self._kill()

    def start(self) -> RayCluster:
        try:
            for number, resources in enumerate(self.nodes):
                self._start_node(resources, head=number == 0)
            self._wait_for_nodes()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_nodes(self, timeout: float = 180) -> None:
        probe = (
            "import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        deadline = time.monotonic() + timeout
        while True:
            run = subprocess.run(
                [sys.executable, "-c", probe, self.address],
                env=self._environ(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            if run.returncode == 0 and run.stdout.strip().splitlines()[-1:] == [str(len(self.nodes))]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Ray cluster has not got {len(self.nodes)} nodes: {run.stderr[-1000:]}"
                )
            time.sleep(1)

    def worker_pids(self) -> list[int]:
        """Ray's worker processes (``default_worker.py``) of this cluster."""
        pids = []
        for pid in marked_pids(self.marker):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"default_worker.py" in command:
                pids.append(pid)
        return pids

    def _kill(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = marked_pids(self.marker)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 15
            while marked_pids(self.marker) and time.monotonic() < deadline:
                time.sleep(0.2)

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
