"""Wall time of ``run_infer.py --sdk v1 --dataset webarena`` with ``--num-workers 2`` vs 1.

Run::

    .venv/bin/python benchmarks/webarena_parallel.py [--workers 2] [--trajectory success] [--task-ids ...]

The 41 curated task ids (``tests/standins/tasks.json``) on the stand-in sites, the scripted model,
resets of the task's own sites before every task (``--reset-when always``, so every task runs alone
on its sites: the scheduler's strictest case). The same run with one worker and with ``--workers``,
one after the other, each in a fresh output directory and a freshly reset deployment; prints both
wall times, the ratio, and whether every task got the same score (it must). Needs ``.venv-v1``
(``scripts/setup.sh``). Expect minutes per run: each task starts a Chromium and an agent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.standins import StandIns  # noqa: E402

TRAJECTORIES = REPO / "tests" / "standins" / "tasks.json"
V1_PYTHON = REPO / ".venv-v1" / "bin" / "python"
RESET_SCRIPT = (
    "import os, urllib.request; e = os.environ; "
    "urllib.request.urlopen(e['TEST_RESET_URL'] + '?sites=' + e['WEBARENA_TASK_SITES'], timeout=60).close()"
)


def _run(
    sites: StandIns, reset_url: str, root: Path, workers: int, args: argparse.Namespace
) -> tuple[float, dict[int, float], str]:
    sites.reset()
    for name in ("home", "tmp"):
        (root / name).mkdir(parents=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WA_", "WEBARENA_"))}
    environ |= sites.environ() | {
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "TEST_RESET_URL": reset_url,
    }
    command = [
        str(V1_PYTHON),
        str(REPO / "evaluation" / "benchmarks" / "webarena" / "run_infer.py"),
        "--sdk", "v1", "--dataset", "webarena",
        "--output-dir", str(root / "run"),
        "--trajectory", args.trajectory,
        "--trajectories", str(TRAJECTORIES),
        "--reset-cmd", f"{sys.executable} -c {json.dumps(RESET_SCRIPT)}",
        "--reset-when", "always",
        "--num-workers", str(workers),
        "--task-ids", *map(str, args.task_ids),
    ]  # fmt: skip
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    completed = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    load = f"load average {load_before:.1f} at the start, {os.getloadavg()[1]:.1f} (5 min) at the end"
    if completed.returncode != 0:
        sys.exit(f"run_infer failed (N={workers}):\n{completed.stderr[-3000:]}")
    scores = {}
    for text in (root / "run" / "output.jsonl").read_text().splitlines():
        line = json.loads(text)
        scores[int(line["instance"]["task_id"])] = line["test_result"]["reward"]
    return seconds, scores, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trajectory", choices=("success", "failure"), default="success")
    parser.add_argument("--task-ids", type=int, nargs="*", default=None)
    args = parser.parse_args()
    if not args.task_ids:
        args.task_ids = [entry["task_id"] for entry in json.loads(TRAJECTORIES.read_text())]
    with StandIns() as sites, tempfile.TemporaryDirectory(prefix="webarena-parallel-") as tmp:

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                for name in parse_qs(urlsplit(self.path).query).get("sites", [""])[0].split(","):
                    site = sites.sites.get(name)
                    if site is not None:
                        with site.app.lock:
                            site.app.sessions.clear()
                            site.app.reset()
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = Thread(target=server.serve_forever, daemon=True)
        thread.start()
        reset_url = f"http://127.0.0.1:{server.server_address[1]}/reset"
        server_url = Path("/tmp/oh-server-url")  # OpenHands writes it whatever TMPDIR says
        server_url_before = server_url.read_bytes() if server_url.exists() else None
        try:
            one, scores_one, load_one = _run(sites, reset_url, Path(tmp) / "n1", 1, args)
            many, scores_many, load_many = _run(
                sites, reset_url, Path(tmp) / f"n{args.workers}", args.workers, args
            )
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
            if server_url_before is None:
                server_url.unlink(missing_ok=True)
            else:
                server_url.write_bytes(server_url_before)
    same = scores_one == scores_many
    expected = 1.0 if args.trajectory == "success" else 0.0
    off_script = sorted(t for t, score in scores_one.items() if score != expected)
    print(f"{len(args.task_ids)} tasks ({args.trajectory}), run_infer --sdk v1 --dataset webarena")
    print(f"  --num-workers 1:            {one:8.1f} s   ({load_one})")
    print(f"  --num-workers {args.workers}:            {many:8.1f} s   ({load_many})")
    print(f"  CPU cores:                  {os.cpu_count()}")
    print(f"  wall-time ratio N={args.workers} / N=1:  {many / one:8.2f}")
    print(f"  same score per task:        {same}")
    print(f"  tasks not scoring {expected} at N=1: {off_script}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
