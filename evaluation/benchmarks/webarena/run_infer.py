"""Run OpenHands on WebArena tasks with capture, shaped like OpenHands' own WebArena ``run_infer``.

    WEBARENA_CDP_LOGGING=true .venv/bin/python evaluation/benchmarks/webarena/run_infer.py \\
        --output-dir D [--dataset demo|webarena] [--mode agent|direct] [--eval-n-limit N] [--task-ids ...]
    .venv/bin/python evaluation/benchmarks/webarena/eval_infer.py D

This script is the command line only. The tasks come from one source for both SDKs
(``task_runner.TaskRun``): the bundled demo tasks on the demo shop, which it serves in-process
(``--dataset demo``, the default), or WebArena's real task ids on your deployment (``--dataset
webarena``: ``webarena_dataset.py``, site URLs, preflight, resets). One loop runs them
(``task_runner.run_tasks``: resume, reset, one ``output.jsonl`` line per task, ``metadata.json``,
``--num-workers N`` through ``scheduler.py``) with one driver per SDK: ``sdk_v0.py`` (``--sdk v0``,
the default: openhands-ai 1.6.0's ``BrowserEnv``, ``--mode agent`` or ``direct``) and ``sdk_v1.py``
(``--sdk v1``: an openhands-sdk agent with openhands-tools' browser tool, in ``.venv-v1``).

``D/output.jsonl`` gets one line per task (``instance_id``, ``instruction``, ``history``,
``metrics``, ``error``, ``test_result``, ``metadata``), ``D/metadata.json`` the run's settings,
``D/sessions/<instance_id>.session.jsonl.gz`` the captured episodes; tasks already in
``output.jsonl`` are skipped. Unless ``--llm-base-url`` names a model, a local scripted LLM plays
each task's scripted trajectory.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

# litellm downloads its model price list at import unless told to use the bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cdp_integration.demo import DemoSite
from cdp_integration.demo.tasks import DemoTask, configure_demo_environment, load_demo_tasks
from cdp_integration.errors import CDPIntegrationError, one_line_error, redact_credentials

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sdk_v0  # this directory's own modules (sdk_v1 is imported by --sdk v1 only)
import webarena_dataset
from task_runner import (
    SCRIPTED_MODEL,
    Driver,
    TaskRun,
    TaskSource,
    demo_task_run,
    run_tasks,
    webarena_task_run,
)

__all__ = ["build_parser", "main", "parse_args", "task_source"]


def _selected_tasks(args: argparse.Namespace) -> list[DemoTask]:
    tasks = load_demo_tasks()
    if args.task_ids:
        wanted = set(args.task_ids)
        tasks = [task for task in tasks if task.task_id in wanted]
    return tasks[: args.eval_n_limit] if args.eval_n_limit else tasks


def task_source(args: argparse.Namespace) -> tuple[TaskSource, str, dict[str, object]]:
    """The run's tasks for either SDK: (source, dataset name, metadata of the dataset).

    ``--dataset webarena`` is prepared here (task ids, site URLs, trajectories, preflight): every
    problem is an ``EnvironmentSetupError`` before any agent starts."""
    if args.dataset == "webarena":
        webarena = webarena_dataset.WebArenaRun(args)
        webarena.prepare()

        @contextlib.contextmanager
        def webarena_tasks() -> Iterator[list[TaskRun]]:
            webarena.configure()
            yield [
                webarena_task_run(
                    spec,
                    webarena.urls,
                    webarena.plans.get(spec.task_id, {}),
                    functools.partial(webarena.before_task, spec),
                    changes_sites=webarena.changes_sites(spec),
                    rehearse=functools.partial(webarena.plan, spec),
                )
                for spec in webarena.tasks
            ]

        return webarena_tasks, "webarena", webarena.metadata()

    @contextlib.contextmanager
    def demo_tasks() -> Iterator[list[TaskRun]]:
        with DemoSite() as site:
            configure_demo_environment(site.base_url)
            yield [demo_task_run(task, site.base_url) for task in _selected_tasks(args)]

    return demo_tasks, "webarena_demo", {}


_PER_RUN_OPTIONS = {"--output-dir": 1, "--eval-output-dir": 1, "--num-workers": 1, "--eval-n-limit": 1}
_BACKENDS = ("local", "ray")


def _child_argv(argv: list[str]) -> list[str]:
    """``argv`` less the options a one-task child gets its own values for (and ``--task-ids``)."""
    kept: list[str] = []
    number = 0
    while number < len(argv):
        token = argv[number]
        name = token.split("=", 1)[0]
        number += 1
        if name == "--task-ids":
            while "=" not in token and number < len(argv) and not argv[number].startswith("-"):
                number += 1  # its values
        elif name in _PER_RUN_OPTIONS:
            number += 0 if "=" in token else _PER_RUN_OPTIONS[name]
        else:
            kept.append(token)
    return kept


def build_parser() -> argparse.ArgumentParser:
    """The command line (also read by the input-surface registry, ``tests/surfaces.py``)."""
    parser = argparse.ArgumentParser(prog="run_infer.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output-dir",
        "--eval-output-dir",
        dest="output_location",
        required=True,
        metavar="DIR_OR_URL",
        help="A directory, or a storage URL (s3://bucket/run, file:///path: fsspec): output.jsonl, "
        "metadata.json and sessions/ go there.",
    )
    parser.add_argument(
        "--dataset",
        choices=("demo", "webarena"),
        default="demo",
        help="demo: the bundled demo tasks on the demo shop; webarena: WebArena's tasks on your deployment.",
    )
    parser.add_argument(
        "--mode",
        choices=("agent", "direct"),
        default="agent",
        help="agent: an OpenHands agent drives the browser (its LLM: --llm-*, else a scripted one); direct: "
        "the task's scripted actions are played in BrowserEnv, no agent (V0 only) [default: %(default)s].",
    )
    parser.add_argument(
        "--sdk",
        choices=("v0", "v1"),
        default="v0",
        help="v0: openhands-ai's BrowserEnv; v1: an openhands-sdk agent with openhands-tools' browser tool.",
    )
    parser.add_argument(
        "--agent-cls",
        default=sdk_v0.AGENT_NAME,
        help="The OpenHands agent class (--sdk v0, --mode agent) [default: %(default)s].",
    )
    parser.add_argument(
        "--max-iterations",
        type=int,
        default=15,
        help="At most this many agent steps per task [default: %(default)s].",
    )
    parser.add_argument(
        "--num-workers",
        type=int,
        default=1,
        help="Tasks side by side, one browser and one agent each (V0: a child run_infer.py per task; "
        "in agent mode the next starts once the previous one's browser is up); a task that changes a "
        "site (WebArena-Verified 'mutate', or reset before) never runs beside another on that site.",
    )
    parser.add_argument("--eval-n-limit", type=int, default=0, help="At most this many tasks (0: all).")
    parser.add_argument("--task-ids", type=int, nargs="*", default=[], help="Only these task ids.")
    parser.add_argument(
        "--trajectory",
        choices=("success", "failure"),
        default="success",
        help="Which scripted trajectory the scripted LLM (and --mode direct) plays.",
    )
    parser.add_argument("--llm-model", default=None, help=f"litellm model name [default: {SCRIPTED_MODEL}].")
    parser.add_argument("--llm-base-url", default=None, help="A real OpenAI-compatible endpoint.")
    parser.add_argument("--llm-api-key", default=None, help="[default: $LLM_API_KEY]")
    parser.add_argument(
        "--llm-stream",
        action="store_true",
        help="--sdk v1: stream the model's replies (openhands-sdk's stream=True with a token callback).",
    )
    webarena_dataset.add_arguments(parser)
    group = parser.add_argument_group("a pool of deployments, a Ray cluster")
    group.add_argument(
        "--pool",
        type=Path,
        default=None,
        metavar="FILE",
        help="--dataset webarena: a TOML or JSON file listing deployments (site URLs, reset command, node "
        "label); a task goes to any deployment free for it. A pool file is code: its reset_cmd values are "
        "shell commands run on this machine (or the Ray node); use only pool files you wrote or trust.",
    )
    group.add_argument(
        "--backend",
        choices=_BACKENDS,
        default="local",
        help="local: this machine's processes [default]; ray: Ray workers, one browser and agent each.",
    )
    group.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="The Ray cluster (HOST:PORT, ray://HOST:PORT, auto) [default: $RAY_ADDRESS, else a local cluster].",
    )
    group.add_argument(
        "--ray-num-cpus", type=int, default=2, help="CPUs of a local Ray cluster [default: 2]."
    )
    group.add_argument(
        "--ray-worker-cpus", type=float, default=1.0, help="CPUs a Ray worker reserves [default: 1]."
    )
    # what a --num-workers run gives each V0 child (sdk_v0.child_driver), not for users
    parser.add_argument("--v0-episode", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--v0-ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.llm_base_url is not None:
        from cdp_integration.deployment import check_site_url
        from cdp_integration.errors import EnvironmentSetupError

        try:
            check_site_url(args.llm_base_url)
        except EnvironmentSetupError as exc:
            parser.exit(2, f"run_infer.py: error: --llm-base-url: {one_line_error(exc)}\n")
    if args.sdk == "v1" and args.mode != "agent":
        parser.error("--sdk v1 runs the agent (--mode agent); --mode direct is V0's BrowserEnv")
    if args.num_workers < 1:
        parser.error("--num-workers must be at least 1")
    if args.llm_base_url is not None and args.mode == "direct":
        parser.error("--mode direct plays the scripted actions; it takes no LLM")
    webarena_dataset.check_arguments(parser, args)
    from cdp_integration import storage

    try:
        args.output_dir = storage.local_path(args.output_location)  # None: a storage URL
    except CDPIntegrationError as exc:
        parser.exit(2, f"run_infer.py: error: --output-dir: {one_line_error(exc)}\n")
    if (args.pool is not None or args.backend == "ray") and args.dataset != "webarena":
        parser.error("--pool and --backend ray run --dataset webarena (a deployment every worker can reach)")
    if args.pool is not None and args.backend == "local" and args.num_workers > 1:
        parser.error("--pool with --backend local runs one task at a time; use --backend ray for more")
    return args


def run(args: argparse.Namespace, argv: Sequence[str]) -> Path:
    """Every selected task once (those already in ``output.jsonl`` skipped); returns its path (a
    storage URL's: the local staging copy, removed once uploaded)."""
    import pool_runner

    if args.v0_episode is not None:  # a child of a V0 --num-workers run: one episode, no output line
        tasks, _, _ = task_source(args)
        sdk_v0.play_child(args, tasks)
        return Path(args.v0_episode)
    if args.pool is not None:  # every URL checked before anything is created or started
        from cdp_integration.pool import load_pool

        load_pool(args.pool)
    output = pool_runner.RunOutput(args.output_location)
    try:
        if args.pool is not None or args.backend == "ray":
            if args.sdk == "v1":
                import sdk_v1

                metadata = sdk_v1.metadata(args, output.dir, "webarena")
            else:
                metadata = sdk_v0.metadata(args, output.dir, "webarena")
            path = pool_runner.run_pool(args, output, metadata)
        else:
            path = _run_local(args, argv, output)
    finally:
        output.finish()
    return path


def _run_local(args: argparse.Namespace, argv: Sequence[str], output: object) -> Path:
    tasks, dataset, dataset_metadata = task_source(args)
    output_dir: Path = output.dir  # type: ignore[attr-defined]
    driver: Driver
    environment = None
    if args.sdk == "v1":
        import sdk_v1  # the V1 environment's (openhands-sdk)

        metadata = sdk_v1.metadata(args, output_dir, dataset)
        driver = functools.partial(sdk_v1.driver, args, output_dir)
        environment = sdk_v1.environment()
    else:
        metadata = sdk_v0.metadata(args, output_dir, dataset)
        if args.num_workers > 1:  # OpenHands V0 runs one BrowserEnv per process: a child per task
            command = [sys.executable, str(Path(__file__).resolve()), *_child_argv(list(argv))]
            gate = sdk_v0.StartGate() if args.mode == "agent" else None  # the 200 s limit: agent mode
            driver = functools.partial(sdk_v0.child_driver, output_dir, command, gate)
        else:
            driver = functools.partial(sdk_v0.driver, args, output_dir)
    return run_tasks(
        output_dir,
        tasks,
        driver,
        metadata=metadata | dataset_metadata,
        workers=args.num_workers,
        environment=environment,
        after_line=output.publish_line,  # type: ignore[attr-defined]
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.sdk == "v0":
        from openhands_patch import ENABLE_VARIABLE, enabled

        if not enabled():
            # Without the hook, OpenHands' browser process knows no demo task: it would die at gym.make
            # and BrowserEnv would wait 200 s per start attempt before giving up.
            what = (
                "the demo task ids exist in OpenHands' browser process only through openhands_patch"
                if args.dataset == "demo"
                else "capture of the WebArena episodes (and the browser set-up OpenHands' browser process "
                "needs) runs in that process only through openhands_patch"
            )
            sys.exit(
                f"run_infer.py: error: set {ENABLE_VARIABLE}=true; {what}, which that variable switches on"
            )
    try:
        output = run(args, list(sys.argv[1:] if argv is None else argv))
    except (
        CDPIntegrationError,
        OSError,
    ) as exc:  # a bad setting or a failed reset: the tasks before it are done
        print(f"run_infer.py: error: {one_line_error(exc)}", file=sys.stderr)
        sys.exit(2)
    if args.v0_episode is None:
        print(
            f"wrote {redact_credentials(args.output_location.rstrip('/'))}/output.jsonl"
            if args.output_dir is None
            else f"wrote {output}"
        )


if __name__ == "__main__":
    main()
