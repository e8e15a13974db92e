"""OpenHands' own ``BrowserEnv`` (openhands-ai 1.6.0, unmodified), capture switched by ``WEBARENA_CDP_LOGGING``.

``BrowserEnv`` runs BrowserGym in a process it spawns; what captures there is the ``.pth`` autoload
that ``openhands_patch`` installs, so these tests exercise the crossing of that process boundary.
Every process they start carries a marker variable; none may outlive its test. Private ``HOME`` and
``TMPDIR`` keep Chromium's and OpenHands' files out of the machine's own.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import re
import signal
import site
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdp_integration.demo import DemoSite
from cdp_integration.demo.state import ShopState
from cdp_integration.demo.tasks import configure_demo_environment
from cdp_integration.evaluate.batch import score_directory
from cdp_integration.session.store import load_session

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:grpcio:FutureWarning")]

FULL = os.environ.get("CDP_TEST_OPENHANDS_FULL") == "1"
"""``make test-openhands``: also OpenHands' whole agent loop (run_infer then eval_infer; the OpenHands
guide's example plays it in ``make test``) and an episode with the variable unset (``make test``
checks the switch where it is read: the ``.pth`` line)."""
only_in_full = pytest.mark.skipif(not FULL, reason="make test-openhands (CDP_TEST_OPENHANDS_FULL=1)")

REPO = Path(__file__).resolve().parents[2]
PTH_SOURCE = REPO / "openhands_patch" / "webarena_cdp_logging.pth"
TASK_ID = 10000
"""string_match (exact SKU): goto the search, open the product, answer; no 3 s program_html waits."""
SKU = "DS-HK-003"
THOUGHT = 'The page shows "DS-HK-003" under\nthe product name: that is the answer.'
MARKER = "CDP_OPENHANDS_TEST_MARKER"


def marked_processes(marker: str) -> list[str]:
    """Live processes whose environment carries ``MARKER=marker``, as ``pid command``.

    Not counted: this process, and its multiprocessing resource tracker (started by BrowserEnv's
    ``spawn``, it lives as long as this process does); nor zombies (exited, waiting to be reaped).
    """
    from multiprocessing import resource_tracker

    own = {os.getpid(), getattr(resource_tracker._resource_tracker, "_pid", None)}
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(f"{entry.name} {command[:200]}")
    return found


def kill_marked_processes(marker: str) -> None:
    """SIGKILL every process carrying ``marker`` (a run that timed out leaves OpenHands' action
    server and its tmux behind: they are started detached from the test's child)."""
    for line in marked_processes(marker):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(line.split(" ", 1)[0]), signal.SIGKILL)


def wait_for_no_marked_processes(marker: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@dataclass
class Episode:
    goal: str
    actions: list[str]
    rewards: list[float]
    urls: list[str]
    sessions: Path


@pytest.fixture(scope="module")
def openhands_env(
    tmp_path_factory: pytest.TempPathFactory, demo_site: DemoSite, demo_corpus: list[Any]
) -> Iterator[Any]:
    """``BrowserEnv`` imported under a private ``HOME``/``TMPDIR``; the module's environment settings.

    It waits for the demo corpus (``demo_corpus``, unused otherwise; the suite then runs the module with
    the corpus users, after the recording): OpenHands' ``BrowserEnv`` child must answer its
    ``check_alive(200)``, which it missed while three recording browsers loaded the machine, and
    OpenHands' own retry then fails (``OSError: handle is closed``)."""
    root = tmp_path_factory.mktemp("openhands")
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    marker = uuid.uuid4().hex
    start_method = multiprocessing.get_start_method(allow_none=True)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.MonkeyPatch.context() as patch:
        configure_demo_environment(demo_site.base_url)
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("TMPDIR", str(root / "tmp"))
        patch.setenv(MARKER, marker)
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price list
        patch.setattr(tempfile, "tempdir", str(root / "tmp"))  # openhands_aci makes a temp dir at import
        from openhands.runtime.browser import browser_env

        yield browser_env, root, marker
    multiprocessing.set_start_method(start_method, force=True)  # BrowserEnv forces "spawn"
    for sig, handler in handlers.items():  # OpenHands' shutdown listener installs its own
        signal.signal(sig, handler)
    assert wait_for_no_marked_processes(marker) == []


def bid_of(obs: dict[str, Any], role: str, name_part: str) -> str:
    """The BrowserGym id of the first accessibility-tree node with ``role`` whose name has ``name_part``."""
    for node in obs["axtree_object"]["nodes"]:
        if node.get("role", {}).get("value") == role and name_part in str(node.get("name", {}).get("value")):
            return str(node["browsergym_id"])
    raise AssertionError(f"no {role} named like {name_part!r} on {obs['url']}")


@pytest.fixture(scope="module")
def captured(openhands_env: Any, demo_site: DemoSite) -> Episode:
    """One eval episode in BrowserEnv's child with ``WEBARENA_CDP_LOGGING=true`` (no instance id set)."""
    browser_env, root, _ = openhands_env
    sessions = root / "sessions"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WEBARENA_CDP_LOGGING", "true")
        patch.setenv("WEBARENA_CDP_SESSION_DIR", str(sessions))
        patch.delenv("WEBARENA_CDP_INSTANCE_ID", raising=False)
        env = browser_env.BrowserEnv(f"browsergym/webarena_demo.{TASK_ID}")
    try:
        goal = env.step(browser_env.BROWSER_EVAL_GET_GOAL_ACTION)["text_content"]
        actions: list[str] = []
        observations: list[dict[str, Any]] = []

        def act(action: str) -> dict[str, Any]:
            actions.append(action)
            observations.append(env.step(action))
            return observations[-1]

        searched = act(f"goto({demo_site.base_url + '/search?q=skillet'!r})")
        assert not searched["last_action_error"]
        # OpenHands' BrowserEnv runs BrowserGym's actions with their 500 ms element timeout, which a loaded
        # machine misses (the click then lands late, or not at all): what counts is the state reached.
        reached = searched
        for _ in range(3):
            reached = act(f"click({bid_of(reached, 'link', 'Cast Iron Skillet')!r})")
            if SKU not in reached["text_content"] and reached["last_action_error"]:
                reached = act("noop(2000)")  # a click that landed late: its page is loading
            if SKU in reached["text_content"] or "Cast Iron Skillet" not in reached["text_content"]:
                break
        if SKU not in reached["text_content"]:  # every click missed its 500 ms: go where the link goes
            product = ShopState().product_by_sku(SKU)
            assert product is not None
            reached = act(f"goto({demo_site.base_url + f'/products/{product.id}'!r})")
        assert SKU in reached["text_content"]
        # the answer goes through the runtime's own browse(), as OpenHands' agent sends it: its thought
        # rides with the action to the browser process (the patches the .pth line's hooks apply in
        # OpenHands' action server, applied here; make test-openhands runs them through the hooks)
        from openhands.events.action import BrowseInteractiveAction
        from openhands.runtime import browser as runtime_browser

        from openhands_patch import _capture

        _capture.patch_openhands_browse(runtime_browser)
        _capture.patch_openhands_browser_env(browser_env.BrowserEnv)
        answer = f"send_msg_to_user({SKU!r})"
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("WEBARENA_CDP_LOGGING", "true")
            actions.append(answer)
            # in a thread of its own: this one may hold Playwright's running loop (BrowserGym's driver)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                sent = pool.submit(
                    asyncio.run,
                    runtime_browser.browse(
                        BrowseInteractiveAction(browser_actions=answer, thought=THOUGHT), env
                    ),
                ).result()
        assert not sent.last_browser_action_error
        observations.append({"url": sent.url})
        rewards = json.loads(env.step(browser_env.BROWSER_EVAL_GET_REWARDS_ACTION)["text_content"])
    finally:
        env.close()
    return Episode(goal, actions, rewards, [obs["url"] for obs in observations], sessions)


def test_one_session_with_the_reset_and_every_action(captured: Episode) -> None:
    files = sorted(path.name for path in captured.sessions.iterdir())
    assert len(files) == 1, files  # saved on SHUTDOWN; no *.partial left
    assert re.fullmatch(rf"webarena_demo\.{TASK_ID}-\d{{8}}-\d{{6}}-\d+\.session\.jsonl\.gz", files[0])
    session = load_session(captured.sessions / files[0])
    assert session.complete
    assert [step.trigger for step in session.steps] == ["reset"] + ["action"] * len(captured.actions)
    assert [step.action for step in session.steps[1:]] == captured.actions
    assert [step.url for step in session.steps[1:]] == captured.urls
    assert [step.reward for step in session.steps[1:]] == captured.rewards
    assert all(step.evaluation is not None for step in session.steps[1:])  # each live validate() recorded
    assert session.task["env_id"] == f"browsergym/webarena_demo.{TASK_ID}"
    assert session.task["config"]["task_id"] == TASK_ID
    assert session.task["goal"] == captured.goal
    reasoning = session.steps[-1].reasoning
    assert reasoning is not None and reasoning.thought == THOUGHT  # with BrowserGym's chat message
    assert [m.text for m in reasoning.messages] == [SKU]
    assert all(step.reasoning is None for step in session.steps[:-1])  # those were sent without one


def test_eval_infer_scores_what_browserenv_rewarded(captured: Episode, tmp_path: Path) -> None:
    assert captured.rewards[-1] == 1.0 and set(captured.rewards[:-1]) == {0.0}
    summary = score_directory(captured.sessions, tmp_path)
    assert (summary.scored, summary.failed) == (1, 0)
    (line,) = [json.loads(text) for text in (tmp_path / "output.jsonl").read_text().splitlines()]
    assert line["test_result"]["max_score"] == max(captured.rewards)  # OpenHands' reward: the max
    assert line["test_result"]["score"] == captured.rewards[-1]
    assert line["test_result"]["live_max"] == max(captured.rewards)


@only_in_full
def test_without_the_variable_nothing_is_written(
    openhands_env: Any, demo_site: DemoSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser_env, root, _ = openhands_env
    sessions = tmp_path / "sessions"
    monkeypatch.chdir(tmp_path)  # where a logger would default to ./cdp_sessions
    monkeypatch.delenv("WEBARENA_CDP_LOGGING", raising=False)
    monkeypatch.setenv("WEBARENA_CDP_SESSION_DIR", str(sessions))
    monkeypatch.setenv("BROWSERGYM_DOWNLOAD_DIR", str(root / "downloads"))  # else /workspace/.downloads/
    env = browser_env.BrowserEnv()  # demo ids exist only with the hook: the plain open-ended env
    try:
        obs = env.step(f"goto({demo_site.base_url + '/search?q=skillet'!r})")
    finally:
        env.close()
    assert obs["url"].endswith("/search?q=skillet") and not obs["last_action_error"]
    assert list(tmp_path.iterdir()) == []


def run_python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WEBARENA_CDP_")} | env
    result = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True, timeout=120
    )
    return result.stdout


def test_pth_autoload_is_installed_and_switched_by_the_variable() -> None:
    installed = [
        Path(d) / PTH_SOURCE.name for d in site.getsitepackages() if (Path(d) / PTH_SOURCE.name).exists()
    ]
    assert [path.read_text() for path in installed] == [PTH_SOURCE.read_text()]
    probe = (
        "import sys, browsergym.core.env as e, browsergym.webarena, gymnasium as gym;"
        "print(sorted(m for m in sys.modules if m.startswith('openhands_patch')),"
        "getattr(e.BrowserEnv, '_webarena_cdp_patched', False),"
        f"'browsergym/webarena_demo.{TASK_ID}' in gym.registry)"
    )
    assert run_python(probe).strip() == "[] False False"
    on = run_python(probe, WEBARENA_CDP_LOGGING="true").strip()
    assert on == "['openhands_patch', 'openhands_patch._capture', 'openhands_patch._hooks'] True True"
    assert run_python(probe, WEBARENA_CDP_LOGGING="false").strip().endswith("False False")


def test_pth_line_imports_nothing_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable the line runs in every interpreter for the cost of ``os.environ.get``:
    it imports nothing but ``os``, and the package itself, imported anyway, loads only the stdlib."""
    monkeypatch.delenv("WEBARENA_CDP_LOGGING", raising=False)
    code = compile(PTH_SOURCE.read_text(), str(PTH_SOURCE), "exec")
    imported: list[str] = []

    def recording_import(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return builtins.__import__(name, *args, **kwargs)

    exec(code, {"__builtins__": {**vars(builtins), "__import__": recording_import}})
    assert imported == ["os"]
    probe = "import sys; b = set(sys.modules); import openhands_patch; print(sorted(set(sys.modules) - b))"
    new_modules = subprocess.run(
        [sys.executable, "-c", probe],
        env={k: v for k, v in os.environ.items() if not k.startswith("WEBARENA_CDP_")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loaded = {name.split(".")[0] for name in ast.literal_eval(new_modules)}
    assert "openhands_patch" in loaded
    assert loaded - {"openhands_patch"} <= sys.stdlib_module_names, loaded


@only_in_full
@pytest.mark.timeout(1200)
def test_run_infer_agent_loop_then_eval_infer(tmp_path: Path) -> None:
    """The README's two commands: OpenHands' agent loop (run_controller, LocalRuntime) driven by the
    scripted LLM, capture on, then offline scoring of its output directory.

    run_infer gives LocalRuntime a HOME, TMPDIR and tmux of its own, so even the private ones this test
    passes stay empty; ``/tmp/oh-server-url``, which OpenHands writes whatever TMPDIR says, is restored.
    """
    output, home, tmp = tmp_path / "run", tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    marker = uuid.uuid4().hex
    server_url = Path("/tmp/oh-server-url")
    server_url_before = server_url.read_bytes() if server_url.exists() else None
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WEBARENA_CDP_")} | {
        "WEBARENA_CDP_LOGGING": "true",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        MARKER: marker,
    }
    scripts = REPO / "evaluation" / "benchmarks" / "webarena"
    started = time.perf_counter()
    try:
        run = subprocess.run(
            [
                sys.executable,
                str(scripts / "run_infer.py"),
                "--output-dir",
                str(output),
                "--task-ids",
                str(TASK_ID),
            ],
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,  # ~80 s idle; OpenHands' runtime start-up alone took minutes at load ~25
        )
    except subprocess.TimeoutExpired:
        kill_marked_processes(marker)
        raise
    if run.returncode != 0:  # what a failed run left is not this test's finding: stop it
        kill_marked_processes(marker)
    print(f"\nrun_infer (agent loop, one task): {time.perf_counter() - started:.1f} s")
    assert run.returncode == 0, run.stderr[-3000:]
    assert wait_for_no_marked_processes(marker) == []
    assert (server_url.read_bytes() if server_url.exists() else None) == server_url_before
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []

    (line,) = [json.loads(text) for text in (output / "output.jsonl").read_text().splitlines()]
    assert line["instance_id"] == f"webarena_demo.{TASK_ID}" and line["error"] is None
    assert line["metadata"]["agent_class"] == "WebArenaBrowsingAgent"
    browsed = [
        e["args"]["browser_actions"] for e in line["history"] if e.get("action") == "browse_interactive"
    ]
    assert browsed == line["instance"]["plan"] and browsed[-1] == f"send_msg_to_user({SKU!r})"
    assert line["history"][-1]["action"] == "finish"
    assert line["test_result"]["rewards"] == [0.0, 0.0, 1.0] and line["test_result"]["reward"] == 1.0
    session = load_session(output / line["test_result"]["session"])
    assert [step.trigger for step in session.steps] == ["reset", "action", "action", "action"]
    # each action's thought crossed to the browser process with it, and left the action as it was
    thoughts = [e["args"]["thought"] for e in line["history"] if e.get("action") == "browse_interactive"]
    assert all(thoughts) and [step.action for step in session.steps[1:]] == browsed
    noted = [step.reasoning for step in session.steps[1:]]
    assert [r.thought if r else None for r in noted] == thoughts
    assert [r.source if r else None for r in noted[:-1]] == ["openhands"] * (len(noted) - 1)

    scored = subprocess.run(
        [sys.executable, str(scripts / "eval_infer.py"), str(output), "--no-progress"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    (result,) = [json.loads(t) for t in (output / "eval_output" / "output.jsonl").read_text().splitlines()]
    assert result["instance_id"] == line["instance_id"]
    assert result["test_result"]["max_score"] == line["test_result"]["reward"]
    assert result["test_result"]["score"] == line["test_result"]["rewards"][-1]
