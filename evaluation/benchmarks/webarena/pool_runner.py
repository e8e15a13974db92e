"""``run_infer.py --pool FILE`` and ``--backend ray``: WebArena tasks over a pool of deployments.

The pool (``cdp_integration.pool``) is checked first: a deployment whose sites do not answer is drained,
not fatal. Then one loop hands out work (``PoolScheduler``: ``--num-workers``' rule, mutate-aware by
server, per deployment): a task goes to any deployment free for it. Each deployment has ``workers``
``DeploymentWorker``s: one driver each (``sdk_v0`` / ``sdk_v1``, one browser and one agent at a
time), that deployment's site variables, its reset command. A worker plays a task into its own
staging directory, puts the session at the run's output location (a directory or a storage URL),
and returns the ``output.jsonl`` line; the loop appends it.

Backends: ``local`` runs the workers in this process, one task at a time; ``ray`` makes each worker a
Ray actor (``ray.init(address=...)``, or a local cluster), placed on the node that owns its deployment
(the deployment's ``node_label`` as a Ray custom resource). A reset that fails drains its deployment and
the task waits for another one; an actor that dies loses only its current task, which goes back to the
front of the queue for another deployment and is recorded in its line (``metadata.retries``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdp_integration import storage
from cdp_integration.cluster import check_address, ray_session
from cdp_integration.deployment import WebArenaTaskSpec, site_urls_from_environment
from cdp_integration.errors import EnvironmentSetupError, escape_controls, redact_credentials
from cdp_integration.pool import Deployment, check_pool, load_pool, redacted
from cdp_integration.session.store import PARTIAL_SUFFIX

sys.path.insert(0, str(Path(__file__).resolve().parent))
import webarena_dataset  # this directory's own modules
from scheduler import PoolScheduler
from task_runner import append_line, done_instances, write_metadata

__all__ = ["DeploymentWorker", "RunOutput", "run_pool"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MAX_RESTARTS = 3
"""Worker deaths on one slot before its deployment is drained (a worker that cannot even start)."""


class RunOutput:
    """Where a run writes: a local directory, or a storage URL written through a local staging
    directory (``output.jsonl`` pulled first for resuming; every line, its session and, at the end,
    ``metadata.json`` and the sessions cut short (as ``*.partial``) uploaded)."""

    def __init__(self, location: str) -> None:
        self.location = location
        local = storage.local_path(location)
        self.remote = local is None
        self.dir = local.resolve() if local is not None else Path(tempfile.mkdtemp(prefix="wa-output-"))
        if self.remote:
            output = storage.join(location, "output.jsonl")
            if storage.exists(output):
                storage.download(output, self.dir / "output.jsonl")

    def publish_line(self, line: dict[str, Any], *, session_uploaded: bool = False) -> None:
        """After ``line`` was appended to the staged ``output.jsonl``: its session (unless its worker
        put it there already), then the file."""
        if not self.remote:
            return
        session = (line.get("test_result") or {}).get("session")
        if session and not session_uploaded:
            storage.upload(self.dir / session, storage.join(self.location, session))
        storage.upload(self.dir / "output.jsonl", storage.join(self.location, "output.jsonl"))

    def finish(self) -> None:
        if not self.remote:
            return
        for name in ("metadata.json", "output.jsonl"):
            if (self.dir / name).is_file():
                storage.upload(self.dir / name, storage.join(self.location, name))
        upload_partials(self.dir, self.location)
        shutil.rmtree(self.dir, ignore_errors=True)


def upload_partials(directory: Path, location: str) -> None:
    """Sessions cut short (``sessions/*.partial``) of ``directory`` to ``location``, as partial."""
    sessions = directory / "sessions"
    for path in sorted(sessions.glob(f"*{PARTIAL_SUFFIX}")) if sessions.is_dir() else ():
        storage.upload(path, storage.join(location, "sessions", path.name))
        path.unlink(missing_ok=True)


class DeploymentWorker:
    """One worker of one deployment (a Ray actor with ``--backend ray``): its driver, the deployment's
    site variables and reset command. ``run(task_id, number)`` plays one task; its output line, or
    ``{"drain": why}`` when the deployment could not be reset."""

    def __init__(
        self, args: argparse.Namespace, deployment: Deployment, location: str, metadata: dict[str, Any]
    ) -> None:
        from task_runner import private_home

        os.environ["WEBARENA_WORKER_PID"] = str(os.getpid())
        self.deployment = deployment
        self.location = location
        self.metadata = metadata | {"deployment": deployment.name}
        self.args = args = argparse.Namespace(**vars(args))  # run_infer's, parsed once; this worker's copy
        self.staging = Path(tempfile.mkdtemp(prefix=f"wa-{deployment.name}-"))
        self._stack = contextlib.ExitStack()
        try:
            home = self._stack.enter_context(private_home())
            self.dataset = webarena_dataset.WebArenaRun(args)
            self.dataset.prepare_deployment(deployment)
            self.dataset.configure()
            self.by_id = {spec.task_id: spec for spec in self.dataset.tasks}
            if args.sdk == "v1":
                import sdk_v1

                self._stack.enter_context(sdk_v1.environment())
                driver: Any = functools.partial(sdk_v1.driver, args, self.staging)
            else:
                import sdk_v0

                driver = functools.partial(sdk_v0.driver, args, self.staging)
            self.play = self._stack.enter_context(driver(home))
        except BaseException:
            self.close()
            raise

    def pid(self) -> int:
        return os.getpid()

    def use(self, deployment: Deployment) -> None:
        """Play the next tasks on ``deployment`` (the local backend's one worker, after a drain)."""
        self.deployment = deployment
        self.metadata = self.metadata | {"deployment": deployment.name}
        self.dataset.prepare_deployment(deployment)
        self.dataset.configure()

    def run(self, task_id: int, number: int) -> dict[str, Any]:
        from task_runner import _run_one, webarena_task_run

        spec = self.by_id[task_id]
        dataset = self.dataset
        dataset.configure()  # another worker of this process may have set its deployment's variables
        task = webarena_task_run(
            spec,
            dataset.urls,
            dataset.plans.get(task_id, {}),
            functools.partial(dataset.before_task, spec),
            changes_sites=dataset.changes_sites(spec),
            rehearse=functools.partial(dataset.plan, spec),
        )
        try:
            line = _run_one(task, self.play, number, self.metadata, self.staging)
        except EnvironmentSetupError as exc:  # the reset failed: this deployment is out
            return {"drain": str(exc)}
        session = line["test_result"].get("session")
        if session:
            storage.upload(self.staging / session, storage.join(self.location, session))
            (self.staging / session).unlink(missing_ok=True)
        upload_partials(self.staging, self.location)
        return {"line": line}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            upload_partials(self.staging, self.location)
        self._stack.close()
        shutil.rmtree(self.staging, ignore_errors=True)


# -- the loop -----------------------------------------------------------------------------------------


@dataclass
class _Slot:
    deployment: Deployment
    number: int
    worker: Any = None
    restarts: int = 0
    running: WebArenaTaskSpec | None = None
    handle: Any = None


@dataclass
class _Attempts:
    lost: dict[int, list[str]] = field(default_factory=dict)
    """task id -> the deployments whose worker died while running it."""


def load_deployments(args: argparse.Namespace) -> list[Deployment]:
    """The run's pool: ``--pool FILE``, or one deployment from ``WEBARENA_BASE_URL`` / ``WA_*``."""
    if args.pool is not None:
        return load_pool(args.pool)
    return [Deployment("default", site_urls_from_environment(), None, None, args.num_workers)]


def run_pool(
    args: argparse.Namespace,
    output: RunOutput,
    metadata: dict[str, Any],
    *,
    log: Callable[[str], None] = lambda text: print(
        escape_controls(redact_credentials(text)), file=sys.stderr
    ),
) -> Path:
    """Every selected task not yet in ``output.jsonl``, over the pool; returns the local ``output.jsonl``."""
    pool = load_deployments(args)
    address = args.ray_address or os.environ.get("RAY_ADDRESS")
    if args.backend == "ray" and address:
        check_address(address)  # before the pool's probes: the cheaper mistake first
    dataset = webarena_dataset.WebArenaRun(args)
    dataset.prepare(check_sites=False)
    dataset.reset_cmd = args.reset_cmd or next((d.reset_cmd for d in pool if d.reset_cmd), None)
    healthy, drained = check_pool(pool, dataset.tasks)
    output.dir.mkdir(parents=True, exist_ok=True)
    output_path = output.dir / "output.jsonl"
    done = done_instances(output_path)
    metadata = metadata | {
        "backend": args.backend,
        "pool": [{"name": d.name, "site_urls": redacted(d.urls), "node_label": d.node_label} for d in pool],
        "drained": drained,
    }
    write_metadata(output.dir, metadata)
    numbers = {spec.task_id: number for number, spec in enumerate(dataset.tasks)}
    pending = [spec for spec in dataset.tasks if f"webarena.{spec.task_id}" not in done]
    by_name = {deployment.name: deployment for deployment in healthy}
    scheduler = PoolScheduler(
        pending,
        list(by_name),
        servers=lambda spec, name: by_name[name].servers(spec.sites),
        exclusive=dataset.changes_sites,
    )
    slots = [_Slot(d, n) for d in healthy for n in range(d.workers if args.backend == "ray" else 1)]
    attempts = _Attempts()
    backend = (
        _RayBackend(args, output.location, metadata)
        if args.backend == "ray"
        else _LocalBackend(args, output.location, metadata)
    )
    try:
        while True:
            live = [slot for slot in slots if slot.deployment.name in scheduler.live]
            for slot in live if args.backend == "ray" else live[:1]:
                if slot.running is None:
                    spec = scheduler.take(slot.deployment.name)
                    if spec is not None:
                        slot.running = spec
                        slot.handle = backend.start(slot, spec.task_id, numbers[spec.task_id])
            running = [slot for slot in slots if slot.running is not None]
            if not running:
                if scheduler.pending:
                    raise EnvironmentSetupError(
                        f"{scheduler.pending} task(s) not run: every deployment of the pool was drained "
                        f"({', '.join(sorted(drained))}); finished tasks are kept"
                    )
                break
            slot, result = backend.wait(running)
            spec, slot.running, slot.handle = slot.running, None, None
            assert spec is not None
            name = slot.deployment.name
            if result is None:  # the worker died: the task goes to another deployment
                attempts.lost.setdefault(spec.task_id, []).append(name)
                log(f"webarena.{spec.task_id}: the worker on {name} died; retrying elsewhere")
                scheduler.retry(spec, name)
                slot.worker = None
                slot.restarts += 1
                if slot.restarts >= MAX_RESTARTS:
                    drained[name] = f"its worker died {slot.restarts} times"
                    scheduler.drain(name)
                continue
            if "drain" in result:
                log(f"deployment {name}: drained: {result['drain']}")
                drained[name] = str(result["drain"])
                scheduler.retry(spec, name)
                scheduler.drain(name)
                continue
            scheduler.done(spec, name)
            line = result["line"]
            lost = attempts.lost.get(spec.task_id)
            line["metadata"]["retries"] = len(lost or ())
            if lost:
                line["metadata"]["retried_after"] = lost
            append_line(output_path, line)
            output.publish_line(line, session_uploaded=True)  # the worker put the session there
    finally:
        backend.close(slots)
    if drained != metadata["drained"]:
        metadata["drained"] = drained
        write_metadata(output.dir, metadata)
    return output_path


class _LocalBackend:
    """One worker in this process, one task at a time, on the first live deployment (the drivers use
    process-wide state, BrowserGym's Playwright and the site variables: one driver serves the run and
    moves to the next deployment when its own is drained)."""

    def __init__(self, args: argparse.Namespace, location: str, metadata: dict[str, Any]) -> None:
        self.args, self.location, self.metadata = args, location, metadata
        self.worker: DeploymentWorker | None = None
        self.result: dict[str, Any] | None = None

    def start(self, slot: _Slot, task_id: int, number: int) -> None:
        if self.worker is None:
            self.worker = DeploymentWorker(self.args, slot.deployment, self.location, self.metadata)
        elif self.worker.deployment.name != slot.deployment.name:
            self.worker.use(slot.deployment)
        self.result = self.worker.run(task_id, number)

    def wait(self, running: list[_Slot]) -> tuple[_Slot, dict[str, Any] | None]:
        return running[0], self.result

    def close(self, slots: list[_Slot]) -> None:
        if self.worker is not None:
            self.worker.close()


class _RayBackend:
    """Each slot's worker is a Ray actor on its deployment's node; ``wait`` returns the first finished."""

    def __init__(self, args: argparse.Namespace, location: str, metadata: dict[str, Any]) -> None:
        self._session = ray_session(
            args.ray_address, num_cpus=args.ray_num_cpus, python_paths=(str(HERE), str(REPO))
        )
        self.ray = self._session.__enter__()
        self.args, self.location, self.metadata = args, location, metadata
        self.actor_class = self.ray.remote(DeploymentWorker)

    def _actor(self, slot: _Slot) -> Any:
        options: dict[str, Any] = {
            "num_cpus": self.args.ray_worker_cpus,
            "max_restarts": 0,
            "max_concurrency": 1,
        }
        if slot.deployment.node_label:
            options["resources"] = {slot.deployment.node_label: 0.001}
        return self.actor_class.options(**options).remote(
            self.args, slot.deployment, self.location, self.metadata
        )

    def start(self, slot: _Slot, task_id: int, number: int) -> Any:
        if slot.worker is None:
            slot.worker = self._actor(slot)
        return slot.worker.run.remote(task_id, number)

    def wait(self, running: list[_Slot]) -> tuple[_Slot, dict[str, Any] | None]:
        by_ref = {slot.handle: slot for slot in running}
        ready, _ = self.ray.wait(list(by_ref), num_returns=1)
        slot = by_ref[ready[0]]
        try:
            return slot, self.ray.get(ready[0])
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError):
            with contextlib.suppress(Exception):
                self.ray.kill(slot.worker)
            return slot, None

    def close(self, slots: list[_Slot]) -> None:
        try:
            closing = [slot.worker.close.remote() for slot in slots if slot.worker is not None]
            with contextlib.suppress(Exception):
                self.ray.get(closing, timeout=120)
            for slot in slots:
                if slot.worker is not None:
                    with contextlib.suppress(Exception):
                        self.ray.kill(slot.worker)
        finally:
            self._session.__exit__(None, None, None)
