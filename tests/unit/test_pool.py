"""A pool of deployments: the pool file, its one-line errors, the drain of a deployment that does not answer,
and ``PoolScheduler``'s rule (mutate-aware by server, per deployment; retries go elsewhere)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from cdp_integration.deployment import load_webarena_tasks
from cdp_integration.errors import EnvironmentSetupError
from cdp_integration.pool import check_pool, load_pool

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "evaluation" / "benchmarks" / "webarena"
sys.path.insert(0, str(SCRIPTS))

from scheduler import PoolScheduler  # noqa: E402

TOML = """
[[deployment]]
name = "a"
base_url = "http://10.0.0.5"
reset_cmd = "reset-a"
node_label = "wa-a"
workers = 2

[[deployment]]
name = "b"
base_url = "http://10.0.0.6"
sites = { SHOPPING = "http://shop-b:80", WA_REDDIT = "http://reddit-b" }
"""


def test_a_toml_pool_file_lists_deployments_with_sites_like_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(TOML)
    a, b = load_pool(path)
    assert (a.name, a.reset_cmd, a.node_label, a.workers) == ("a", "reset-a", "wa-a", 2)
    assert a.urls["SHOPPING"] == "http://10.0.0.5:7770" and a.urls["GITLAB"] == "http://10.0.0.5:8023"
    assert b.urls["SHOPPING"] == "http://shop-b:80" and b.urls["REDDIT"] == "http://reddit-b"
    assert b.urls["MAP"] == "http://10.0.0.6:3000"
    assert (b.reset_cmd, b.node_label, b.workers) == (None, None, 1)
    assert a.servers(["shopping", "shopping_admin"]) == ("a|http://10.0.0.5:7770", "a|http://10.0.0.5:7780")


def test_a_json_pool_file_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"deployment": [{"name": "x", "base_url": "https://h"}]}))
    (only,) = load_pool(path)
    assert only.urls["REDDIT"] == "https://h:9999"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.toml", "[[deployment]\n", "not valid TOML"),
        ("p.json", "{", "not valid JSON"),
        ("p.json", "[]", "non-empty list"),
        ("p.json", '[{"name": "a"}]', "no WebArena site URLs"),
        ("p.json", '[{"name": "a b", "base_url": "http://h"}]', "'name' must be letters"),
        ("p.json", '[{"name": "a", "base_url": "h:80"}]', "base_url: 'h:80' is not an http(s) URL"),
        ("p.json", '[{"name": "a", "base_url": "ftp://h"}]', "is not an http(s) URL"),
        ("p.json", '[{"name": "a", "base_url": "http://h:x"}]', "is not a valid URL (Port"),
        (
            "p.json",
            '[{"name": "a", "base_url": "http://h", "sites": {"SHOP": "http://s"}}]',
            "unknown site 'SHOP'",
        ),
        ("p.json", '[{"name": "a", "base_url": "http://h", "colour": 1}]', "unknown key(s) colour"),
        ("p.json", '[{"name": "a", "base_url": "http://h", "workers": 0}]', "'workers' must be"),
        (
            "p.json",
            '[{"name": "a", "base_url": "http://h"}, {"name": "a", "base_url": "http://g"}]',
            "used twice: a",
        ),
    ],
)
def test_a_bad_pool_file_is_one_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(EnvironmentSetupError) as error:
        load_pool(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_missing_pool_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentSetupError, match="cannot read the pool file"):
        load_pool(tmp_path / "nope.toml")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_deployment_that_does_not_answer_is_drained_not_fatal(tmp_path: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        up = f"http://127.0.0.1:{server.server_address[1]}"
        down = f"http://127.0.0.1:{_closed_port()}"
        path = tmp_path / "pool.json"
        sites = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE")
        path.write_text(
            json.dumps(
                [
                    {"name": "up", "sites": dict.fromkeys(sites, up)},
                    {"name": "down", "sites": dict.fromkeys(sites, down)},
                ]
            )
        )
        pool = load_pool(path)
        tasks = load_webarena_tasks([27, 377])
        healthy, drained = check_pool(pool, tasks, timeout_s=2)
        assert [d.name for d in healthy] == ["up"]
        assert set(drained) == {"down"} and "connection refused" in drained["down"]
        with pytest.raises(EnvironmentSetupError, match="no deployment of the pool answers: down"):
            check_pool([pool[1]], tasks, timeout_s=2)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- PoolScheduler ----------------------------------------------------------------------------------

SITES = {"m1": ("reddit",), "r1": ("reddit",), "r2": ("map",), "m2": ("reddit",), "r3": ("reddit",)}
MUTATE = {"m1", "m2"}


def _scheduler(tasks: list[str], deployments: tuple[str, ...] = ("a", "b")) -> PoolScheduler[str]:
    return PoolScheduler(
        tasks,
        list(deployments),
        servers=lambda task, name: tuple(f"{name}|{site}" for site in SITES[task]),
        exclusive=lambda task: task in MUTATE,
    )


def test_a_mutate_task_runs_alone_on_its_site_of_one_deployment_and_beside_it_on_another() -> None:
    scheduler = _scheduler(["m1", "r1", "r2", "m2", "r3"])
    assert scheduler.take("a") == "m1"
    assert scheduler.take("a") == "r2"  # r1 shares a's reddit with m1; map is free
    assert scheduler.take("b") == "r1"  # b's reddit is free
    assert scheduler.take("b") is None  # m2 waits for b's reddit reader; r3 may not jump a waiting writer
    scheduler.done("r1", "b")
    assert scheduler.take("b") == "m2"
    assert scheduler.take("a") is None
    scheduler.done("m1", "a")
    assert scheduler.take("a") == "r3"
    assert scheduler.pending == 0


def test_a_task_whose_worker_died_goes_first_to_another_deployment() -> None:
    scheduler = _scheduler(["r1", "r2"])
    assert scheduler.take("a") == "r1"
    scheduler.retry("r1", "a")
    assert scheduler.take("a") == "r2"  # r1 is avoided on a while b is live
    assert scheduler.take("b") == "r1"


def test_a_retried_task_may_run_again_where_it_died_when_no_other_deployment_is_left() -> None:
    scheduler = _scheduler(["r1"])
    scheduler.take("a")
    scheduler.retry("r1", "a")
    scheduler.drain("b")
    assert scheduler.take("b") is None
    assert scheduler.take("a") == "r1"


# -- run_infer's one-line errors --------------------------------------------------------------------


def _run_infer(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WA_", "WEBARENA_", "RAY_"))}
    environ |= {"WEBARENA_CDP_LOGGING": "true"} | (env or {})
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "run_infer.py"),
            "--dataset",
            "webarena",
            "--output-dir",
            str(tmp_path / "o"),
            "--trajectories",
            str(REPO / "tests" / "standins" / "tasks.json"),
            "--task-ids",
            "27",
            *args,
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_run_infer_bad_pool_file_bad_url_and_unreachable_ray_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[deployment]]\nname = "a"\nbase_url = "not a url"\n')
    run = _run_infer(tmp_path, "--pool", str(bad))
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("run_infer.py: error: ") and "base_url: 'not a url' is not a URL" in line

    run = _run_infer(tmp_path, env={"WEBARENA_BASE_URL": "my-host"})
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert "WEBARENA_BASE_URL: 'my-host' is not an http(s) URL" in line

    good = tmp_path / "good.toml"
    good.write_text('[[deployment]]\nname = "a"\nbase_url = "http://127.0.0.1"\n')
    port = _closed_port()
    run = _run_infer(tmp_path, "--pool", str(good), "--backend", "ray", "--ray-address", f"127.0.0.1:{port}")
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert f"Ray cluster at 127.0.0.1:{port} is unreachable" in line
    assert not (tmp_path / "o").exists()


# -- hostile pool files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 32 deep"),
        ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "nested more than 32 deep"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://[::1"\n', "is not a valid URL"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://ex\u2100ample"\n', "printable ASCII"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://h\uff0fx"\n', "printable ASCII"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://127.0.0.1:1"\n', "names the host only"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://h/x"\n', "names the host only"),
        ('[[deployment]]\nname = "a"\nbase_url = "http://h\\u001b]52;c;eA==\\u0007"\n', "printable ASCII"),
        (
            '[[deployment]]\nname = "a"\nbase_url = "http://h"\nsites = { MAP = "http://h:99999" }\n',
            "valid URL",
        ),
        (
            "".join(f'[[deployment]]\nname = "d{n}"\nbase_url = "http://h"\n' for n in range(300)),
            "more than 256",
        ),
    ],
)
def test_a_hostile_pool_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pool.toml"
    path.write_text(text)
    with pytest.raises(EnvironmentSetupError, match=message) as caught:
        load_pool(path)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_a_pool_url_with_credentials_is_shown_and_written_without_them(tmp_path: Path) -> None:
    """Drained: the reason on stderr hides the password; healthy: metadata.json's pool and every
    output.jsonl line hide it too (task_runner's writers), and a planted symlink is not followed."""
    from task_runner import append_line, write_metadata

    from cdp_integration.pool import redacted

    path = tmp_path / "pool.toml"
    port = _closed_port()
    path.write_text(
        f'[[deployment]]\nname = "a"\nbase_url = "http://admin:hunter2@127.0.0.1"\n'
        f'sites = {{ SHOPPING = "http://admin:hunter2@127.0.0.1:{port}" }}\n'
    )
    (deployment,) = load_pool(path)
    tasks = load_webarena_tasks([21])  # a shopping task
    with pytest.raises(EnvironmentSetupError) as caught:
        check_pool([deployment], tasks, timeout_s=0.5)
    assert "hunter2" not in str(caught.value) and "admin:***" not in str(caught.value)
    assert "http://***@127.0.0.1" in str(caught.value)

    out = tmp_path / "run"
    out.mkdir()
    write_metadata(out, {"pool": [{"name": "a", "site_urls": deployment.urls}]})
    append_line(
        out / "output.jsonl", {"metadata": {"site_urls": redacted(deployment.urls), "u": deployment.urls}}
    )
    written = (out / "metadata.json").read_text() + (out / "output.jsonl").read_text()
    assert "hunter2" not in written and "http://***@127.0.0.1:7780/admin" in written

    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (out / "metadata.json").unlink()
    (out / "metadata.json").symlink_to(victim)
    (out / "output.jsonl").unlink()
    (out / "output.jsonl").symlink_to(victim)
    from cdp_integration.errors import SessionFormatError

    with pytest.raises(SessionFormatError, match="symbolic link"):
        write_metadata(out, {})
    with pytest.raises(SessionFormatError, match="symbolic link"):
        append_line(out / "output.jsonl", {})
    assert victim.read_text() == "untouched"


def test_a_resumed_run_reads_output_jsonl_through_the_hardened_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming reads the ids already done: a planted symlink is refused (never read through), a FIFO
    never blocks, an over-long line is refused before it is held, and lines that are not a JSON object
    with a string ``instance_id`` are skipped."""
    from task_runner import done_instances

    from cdp_integration.errors import SessionFormatError

    out = tmp_path / "run"
    out.mkdir()
    output = out / "output.jsonl"
    assert done_instances(output) == set()
    output.write_text(
        '{"instance_id": "webarena.1"}\n[1]\n{"instance_id": 2}\nnot json\n{"x": 1}\n'
        + "[" * 100_000
        + "\n"
        + '{"instance_id": "webarena.3"}'
    )
    assert done_instances(output) == {"webarena.1", "webarena.3"}

    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"instance_id": "stolen"}\n')
    output.unlink()
    output.symlink_to(secret)
    with pytest.raises(SessionFormatError, match="symbolic link"):
        done_instances(output)
    output.unlink()
    output.symlink_to(tmp_path / "nowhere")  # dangling: still a planted link, still refused
    with pytest.raises(SessionFormatError, match="symbolic link"):
        done_instances(output)
    output.unlink()
    os.mkfifo(output)
    with pytest.raises(SessionFormatError, match="not a regular file"):
        done_instances(output)
    output.unlink()
    monkeypatch.setenv("CDP_SESSION_MAX_RECORD_BYTES", "100000")
    output.write_bytes(b'{"instance_id": "' + b"a" * 200_000)
    with pytest.raises(SessionFormatError, match="longer than"):
        done_instances(output)


def test_the_pool_help_says_a_pool_file_is_code() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "run_infer.py"), "--help"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "A pool file is code" in text and "It is code this machine runs" in text
