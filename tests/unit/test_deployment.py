"""A WebArena deployment's site URLs, preflight, task configs and reset command (no browser)."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from cdp_integration.deployment import (
    STANDARD_PORTS,
    known_site_urls,
    load_webarena_tasks,
    needs_reset,
    parse_site_urls,
    preflight,
    probe_sites,
    run_reset,
    site_urls_from_environment,
    verified_task_types,
)
from cdp_integration.environment import PLACEHOLDER_URL
from cdp_integration.errors import EnvironmentSetupError

ALL_SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@pytest.fixture
def http_port() -> Iterator[int]:
    """A real HTTP server answering 404 to everything (any answer counts as reachable)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_urls_from_the_base_url_on_the_standard_ports() -> None:
    urls = site_urls_from_environment({"WEBARENA_BASE_URL": "http://wa.example/"})
    assert urls == {site: "http://wa.example" + suffix for site, suffix in STANDARD_PORTS.items()}
    assert urls["SHOPPING_ADMIN"] == "http://wa.example:7780/admin"


def test_wa_variables_override_the_base_and_placeholders_do_not() -> None:
    environ = {
        "WEBARENA_BASE_URL": "http://wa.example",
        "WA_GITLAB": "http://gitlab.internal:8080/",
        "WA_MAP": PLACEHOLDER_URL,  # what environment.prepare() sets when nothing is given
    }
    urls = site_urls_from_environment(environ)
    assert urls["GITLAB"] == "http://gitlab.internal:8080"
    assert urls["MAP"] == "http://wa.example:3000"
    assert urls["REDDIT"] == "http://wa.example:9999"


def test_all_wa_variables_without_a_base_url() -> None:
    environ = {f"WA_{site}": f"http://{site.lower()}.internal" for site in STANDARD_PORTS}
    assert site_urls_from_environment(environ)["WIKIPEDIA"] == "http://wikipedia.internal"


def test_missing_urls_name_the_variables() -> None:
    with pytest.raises(EnvironmentSetupError, match=r"WEBARENA_BASE_URL .* WA_SHOPPING_ADMIN, WA_REDDIT"):
        site_urls_from_environment({"WA_SHOPPING": "http://shop", "WA_MAP": PLACEHOLDER_URL})
    with pytest.raises(EnvironmentSetupError, match=r"WEBARENA_BASE_URL: 'wa\.example' is not an http"):
        site_urls_from_environment({"WEBARENA_BASE_URL": "wa.example"})


def test_known_site_urls_leave_out_what_the_environment_does_not_give() -> None:
    assert known_site_urls({}) == {}
    assert known_site_urls({"WA_SHOPPING": "http://shop/", "WA_MAP": PLACEHOLDER_URL}) == {
        "SHOPPING": "http://shop"
    }
    urls = known_site_urls({"WEBARENA_BASE_URL": "http://wa", "WA_REDDIT": "http://forum"})
    assert urls["SHOPPING_ADMIN"] == "http://wa:7780/admin" and urls["REDDIT"] == "http://forum"
    assert len(urls) == len(STANDARD_PORTS)


def test_site_url_options_are_site_equals_url() -> None:
    assert parse_site_urls(["shopping=http://h:7770/", "SHOPPING_ADMIN=https://h/admin"]) == {
        "SHOPPING": "http://h:7770",
        "SHOPPING_ADMIN": "https://h/admin",
    }
    for bad, message in [
        ("shopping", "is not SITE=URL"),
        ("=http://h", "is not SITE=URL"),
        ("shop=http://h", "unknown site 'shop'"),
        ("shopping=h:7770", "is not an http"),
    ]:
        with pytest.raises(EnvironmentSetupError, match=message):
            parse_site_urls([bad])


def test_tasks_come_from_test_raw_json_in_the_order_asked() -> None:
    tasks = load_webarena_tasks([44, 0, 44])
    assert [t.task_id for t in tasks] == [44, 0]
    assert tasks[0].env_id == "browsergym/webarena.44"
    assert tasks[0].sites == ("gitlab",)
    assert "__GITLAB__" in json.dumps(tasks[0].config)  # placeholders kept; BrowserGym fills them in
    assert len(load_webarena_tasks()) == 812
    assert [t.task_id for t in load_webarena_tasks(limit=3)] == [0, 1, 2]
    with pytest.raises(EnvironmentSetupError, match=r"unknown WebArena task id.* 812, 9999"):
        load_webarena_tasks([812, 9999])


def test_reset_policy() -> None:
    types = verified_task_types()
    assert len(types) == 812 and set(types.values()) == {"retrieve", "navigate", "mutate"}
    (retrieve,) = load_webarena_tasks([0])  # "top-1 best-selling product": retrieve
    mutate = next(t for t in load_webarena_tasks() if types[t.task_id] == "mutate")
    assert types[0] == "retrieve"
    flagged = replace(retrieve, config={**retrieve.config, "require_reset": True})
    assert [needs_reset(t, "require_reset") for t in (retrieve, mutate, flagged)] == [False, False, True]
    assert [needs_reset(t, "mutate") for t in (retrieve, mutate, flagged)] == [False, True, True]
    assert [needs_reset(t, "always") for t in (retrieve, mutate, flagged)] == [True, True, True]


def test_probe_names_every_dead_site_and_takes_one_timeout(silent_port: int, http_port: int) -> None:
    closed = _closed_port()
    urls = {
        "shopping": f"http://127.0.0.1:{closed}",
        "reddit": f"http://127.0.0.1:{silent_port}",
        "gitlab": f"http://127.0.0.1:{silent_port}/users/sign_in",
        "map": f"http://127.0.0.1:{http_port}/",
    }
    started = time.monotonic()
    dead = probe_sites(urls, timeout_s=1.0)
    elapsed = time.monotonic() - started
    assert dead == {
        "shopping": "connection refused",
        "reddit": "no answer within 1 s",
        "gitlab": "no answer within 1 s",
    }
    assert elapsed < 1.0 * 3  # concurrent: one timeout, not one per silent site


def test_preflight_checks_only_the_tasks_sites_and_the_judge(http_port: int) -> None:
    closed = _closed_port()
    urls = {site: f"http://127.0.0.1:{closed}" for site in STANDARD_PORTS} | {
        "GITLAB": f"http://127.0.0.1:{http_port}"
    }
    (gitlab_task,) = load_webarena_tasks([44])
    preflight([gitlab_task], urls, timeout_s=1.0, environ={})
    (shopping_task,) = load_webarena_tasks([21])
    with pytest.raises(EnvironmentSetupError) as raised:
        preflight([gitlab_task, shopping_task], urls, timeout_s=1.0, environ={})
    assert str(raised.value).startswith("1 of 2 WebArena sites unreachable")
    assert f"shopping (http://127.0.0.1:{closed}: connection refused)" in str(raised.value)
    judged = next(t for t in load_webarena_tasks() if t.uses_llm_judge and t.sites == ("gitlab",))
    with pytest.raises(EnvironmentSetupError, match=r"LLM judge .* set OPENAI_API_KEY"):
        preflight([judged], urls, timeout_s=1.0, environ={})
    preflight([judged], urls, timeout_s=1.0, environ={"OPENAI_API_KEY": "k"})


def test_reset_command_gets_the_task_and_the_sites(tmp_path: Path) -> None:
    (task,) = load_webarena_tasks([118])  # a shopping task
    task = replace(task, config={**task.config, "require_reset": True})
    urls = site_urls_from_environment({"WEBARENA_BASE_URL": "http://wa.example"})
    out = tmp_path / "env.json"
    script = (
        "import json, os, sys; json.dump({k: v for k, v in os.environ.items() "
        "if k.startswith(('WEBARENA_', 'WA_', 'SHOPPING'))}, open(sys.argv[1], 'w'))"
    )
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {shlex.quote(str(out))}"
    assert needs_reset(task, "require_reset")
    seconds = run_reset(command, task, urls)
    assert seconds >= 0
    seen = json.loads(out.read_text())
    assert seen["WEBARENA_TASK_ID"] == "118"
    assert seen["WEBARENA_ENV_ID"] == "browsergym/webarena.118"
    assert seen["WEBARENA_TASK_SITES"] == ",".join(task.sites)
    assert seen["WA_SHOPPING_ADMIN"] == seen["SHOPPING_ADMIN"] == "http://wa.example:7780/admin"
    assert seen["WA_MAP"] == "http://wa.example:3000"


def test_a_failing_reset_command_stops_the_run() -> None:
    (task,) = load_webarena_tasks([0])
    with pytest.raises(EnvironmentSetupError, match="exited with 3 before task 0"):
        run_reset("exit 3", task, {"SHOPPING": "http://x"})
