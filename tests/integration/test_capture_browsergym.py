"""The logger attached to BrowserGym (``browsergym/openended``) on the demo site, real Chromium.

Every step of every bundled episode is captured with the URL, cookies, storage and network traffic
the episode produced; capture failures are recorded and never break the episode.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdp_integration import CDPSessionLogger, Session, load_session
from cdp_integration.demo import DemoSite, agent
from cdp_integration.demo.agent import (
    EPISODE_ATTEMPTS,
    ActionFailed,
    Episode,
    load_episodes,
    patient_action_mapping,
    run_episode,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sessions(
    demo_site: DemoSite, viewer_sessions: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Session]:
    """Every bundled episode: the viewer's two (captured with screenshots, accessibility trees and every
    response body) and the others played here with the logger's defaults."""
    out = tmp_path_factory.mktemp("sessions")
    result = {}
    for episode in load_episodes():
        path = viewer_sessions.get(episode.id) or run_episode(
            episode, demo_site.base_url, out, reset=demo_site.reset
        )
        result[episode.id] = load_session(path)
    return result


def documents(step, method: str | None = None):  # type: ignore[no-untyped-def]
    return [
        e
        for e in step.network
        if e.request.resource_type == "Document" and (method is None or e.request.method == method)
    ]


def test_one_step_per_action_plus_reset(sessions: dict[str, Session]) -> None:
    for episode in load_episodes():
        session = sessions[episode.id]
        assert session.complete
        assert [s.trigger for s in session.steps] == ["reset"] + ["action"] * len(episode.steps)
        assert all(not s.faults for s in session.steps), episode.id
        assert all(s.tabs and s.html and s.active_tab.dom_snapshot for s in session.steps)
        # BrowserGym's own snapshot of the state the agent observed (its bid markers included) is reused
        assert all(s.active_tab.dom_snapshot_source == "observation" for s in session.steps)
        assert all("bid" in s.active_tab.dom_snapshot["strings"] for s in session.steps)
        assert all(t.dom_snapshot_source == "cdp" for s in session.steps for t in s.tabs if not t.active)


def test_each_step_has_a_thumbnail_made_from_browsergyms_own_screenshot(sessions: dict[str, Session]) -> None:
    """With default options the thumbnail is BrowserGym's observation screenshot, made small: the
    same pixels the agent saw, and no second picture asked of Chromium."""
    from PIL import Image

    plain = [s for episode, s in sessions.items() if not s.header.options["screenshot"]]
    assert plain, "every episode was captured with screenshot=True"
    for session in plain:
        for step in session.steps:
            tab = step.active_tab
            assert tab is not None and tab.thumbnail_webp and tab.viewport == (1280, 720)
            image = Image.open(io.BytesIO(base64.b64decode(tab.thumbnail_webp, validate=True)))
            assert image.format == "WEBP" and image.size == (160, 90)
            assert all(t.thumbnail_webp is None for t in step.tabs if not t.active)


def test_login_post_redirect_cookie_and_wire_headers(
    sessions: dict[str, Session], demo_site: DemoSite
) -> None:
    steps = sessions["demo.search-and-review"].steps
    base = demo_site.base_url
    assert steps[1].url == f"{base}/login" and steps[1].title == "Customer Login"
    assert not steps[3].cookies
    post, follow = documents(steps[4])
    assert (post.request.method, post.request.url, post.response.status) == ("POST", f"{base}/login", 302)
    assert post.response.redirect_url == f"{base}/account"
    assert "username=emma" in post.request.post_data and "password=emma1234" in post.request.post_data
    assert (follow.request.method, follow.request.url, follow.response.status) == (
        "GET",
        f"{base}/account",
        200,
    )
    assert follow.request.headers_source == "wire"
    assert follow.request.headers["sec-fetch-mode"] == "navigate"
    assert follow.request.headers["accept"].startswith("text/html")
    assert "session=" in follow.request.headers["cookie"]
    assert "My Account" in follow.response.body
    cookie = next(c for c in steps[4].cookies if c.name == "session")
    assert cookie.http_only and cookie.domain == "127.0.0.1"
    assert steps[4].url == f"{base}/account"


def test_state_change_and_answer(sessions: dict[str, Session]) -> None:
    session = sessions["demo.search-and-review"]
    review_post = documents(session.steps[11], "POST")[0]
    assert review_post.request.url.endswith("/products/5/reviews")
    posted = re.compile(r'class="review-title"[^>]*>Great mug<')
    assert not posted.search(session.steps[10].html)
    assert posted.search(session.steps[11].html)
    assert session.final_answer == "$24.00"
    assert 'id="product-price"' in session.steps[-1].html and "$24.00" in session.steps[-1].html
    # What the agent said in BrowserGym's chat is the reasoning of the step that said it, and only of it.
    said = [(step.index, step.reasoning) for step in session.steps if step.reasoning is not None]
    assert [(index, r.source, [(m.role, m.text) for m in r.messages]) for index, r in said] == [
        (session.steps[-1].index, "browsergym", [("assistant", "$24.00")])
    ]


def test_fetch_traffic_and_storage(sessions: dict[str, Session], demo_site: DemoSite) -> None:
    steps = sessions["demo.feed-and-preferences"].steps
    origin = demo_site.base_url
    api = [e for e in steps[1].network if e.request.resource_type == "Fetch"]
    assert [e.request.url for e in api] == [f"{origin}/api/products?limit=5"]
    assert api[0].response.status == 200 and api[0].response.mime_type == "application/json"
    assert 'class="feed-item"' in steps[1].html  # the DOM after fetch() filled it, not the served HTML
    assert steps[1].local_storage.get(origin, {}) == {}
    assert steps[2].local_storage[origin]["theme"] == "dark"
    assert "newsletter" not in steps[2].local_storage[origin]
    assert steps[3].local_storage[origin]["newsletter"] == "yes"
    assert steps[2].active_tab.session_storage[origin]["visit_token"].startswith("visit-")


def test_new_tab_is_followed_and_its_first_request_captured(
    sessions: dict[str, Session], demo_site: DemoSite
) -> None:
    steps = sessions["demo.help-in-new-tab"].steps
    assert len(steps[1].tabs) == 1
    assert len(steps[2].tabs) == 2
    links_tab, help_tab = steps[2].tabs
    assert help_tab.active and help_tab.url == f"{demo_site.base_url}/help"
    assert not links_tab.active and links_tab.html and "open-help" in links_tab.html
    (help_doc,) = documents(steps[2])
    assert help_doc.tab_id == help_tab.tab_id
    assert help_doc.request.headers["accept"].startswith("text/html")
    assert steps[3].tabs[1].active
    assert steps[4].active_tab.tab_id == links_tab.tab_id  # tab_focus(0)
    assert steps[4].url.endswith("/links")


def test_redirect_chain_and_back_navigation(sessions: dict[str, Session], demo_site: DemoSite) -> None:
    steps = sessions["demo.admin-edit-price"].steps
    base = demo_site.base_url
    hops = documents(steps[1])
    assert [(h.request.url, h.response.status) for h in hops] == [
        (f"{base}/admin", 302),
        (f"{base}/login?next=/admin", 200),
    ]
    assert hops[0].request_id == hops[1].request_id
    assert hops[0].response.redirect_url == f"{base}/login?next=/admin"
    assert steps[8].action == "go_back()"
    (back,) = documents(steps[8])
    assert back.request.url == f"{base}/admin/products/3/edit"
    # Chromium serves the back navigation from its cache: no wire headers, and the page shows the
    # price as it was before the save. The capture must show what the browser showed.
    assert back.response.from_cache and back.request.headers_source == "inferred"
    assert back.request.headers["accept"].startswith("text/html")
    assert 'value="19.99"' in steps[7].html and 'value="45.50"' in steps[8].html


def test_capture_faults_are_recorded_and_episode_goes_on(demo_site: DemoSite, tmp_path: Path) -> None:
    """A huge page (HTML over the limit) and a CDP session that dies mid-episode."""
    episode = next(e for e in load_episodes() if e.id == "demo.checkout")
    for attempt in range(1, EPISODE_ATTEMPTS + 1):  # as run_episode plays an episode again
        try:
            path = _checkout_with_faults(demo_site, episode, tmp_path / f"attempt-{attempt}")
            break
        except ActionFailed:
            if attempt == EPISODE_ATTEMPTS:
                raise
    session = load_session(path)
    assert len(session.steps) == len(episode.steps) + 1
    assert session.final_answer == "000000003"  # the episode reached its end
    assert all(any(f.stage == "html" for f in s.faults) for s in session.steps if s.index != 5)
    assert all(s.active_tab.dom_snapshot for s in session.steps if s.index != 5)
    broken = session.steps[5]
    assert any(f.stage == "tab" for f in broken.faults)
    assert broken.url.endswith("/products/2")  # recovered from Playwright when CDP failed
    assert session.steps[6].url.endswith("/cart")  # re-attached at the next capture
    assert not any(f.stage == "tab" for f in session.steps[6].faults)


def _checkout_with_faults(demo_site: DemoSite, episode: Episode, out: Path) -> Path:
    """``episode`` from a reset shop, its HTML over the logger's limit and the logger's CDP sessions
    detached before step 4; raises `ActionFailed` (its partial file removed) as `run_episode` does."""
    import browsergym.core  # noqa: F401
    import gymnasium as gym

    from cdp_integration.demo.agent import play_step

    demo_site.reset()
    env = gym.make(
        "browsergym/openended",
        task_kwargs={"start_url": demo_site.base_url + "/"},
        headless=True,
        slow_mo=0,
        action_mapping=patient_action_mapping(),
        wait_for_user_message=False,
    )
    logger = CDPSessionLogger(out, max_html_bytes=2_000)
    try:
        logger.attach_to_browsergym_env(env)
        env.reset()
        for index, step in enumerate(episode.steps):
            if index == 4:
                for tab in list(logger._tracker.tabs.values()):
                    tab.cdp.detach()  # the CDP connection breaks under the logger
            play_step(env, step, demo_site.base_url)
        return logger.save_session("faulty")
    except ActionFailed:
        if logger.partial_path is not None:
            logger.partial_path.unlink(missing_ok=True)
        raise
    finally:
        env.close()


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from cdp_integration import environment
    environment.prepare()
    import browsergym.core, gymnasium as gym
    from cdp_integration import CDPSessionLogger
    from cdp_integration.demo.agent import load_episodes, patient_action_mapping, to_browsergym_action
    base, out, kill_after = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    episode = next(e for e in load_episodes() if e.id == "demo.search-and-review")
    env = gym.make("browsergym/openended", task_kwargs={"start_url": base + "/"}, headless=True, slow_mo=0,
                   wait_for_user_message=False, action_mapping=patient_action_mapping())
    logger = CDPSessionLogger(out, instance_id="killed")
    logger.attach_to_browsergym_env(env)
    env.reset()
    for index, step in enumerate(episode.steps):
        env.step(to_browsergym_action(step, env.unwrapped.page, base))
        if index + 1 == kill_after:
            print(logger.partial_path, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.skipif(
    os.environ.get("CDP_TEST_FAULTS") != "all",
    reason="make test-faults: make test kills captures mid-write and mid-call (test_fault_injection.py)",
)
def test_sigkill_mid_episode_leaves_completed_steps_readable(demo_site: DemoSite, tmp_path: Path) -> None:
    """SIGKILL between two steps of a BrowserGym episode: the seven completed steps load."""
    demo_site.reset()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, demo_site.base_url, str(tmp_path), "7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        with_group_killed(proc.pid)
    assert proc.returncode == -signal.SIGKILL
    partial = Path(out.strip())
    assert partial.name == "killed.session.jsonl.gz.partial"
    session = load_session(partial)
    assert not session.complete and session.end is None
    assert len(session.steps) == 8  # reset + the 7 actions that completed
    assert session.steps[4].url.endswith("/account")
    assert any(c.name == "session" for c in session.steps[4].cookies)
    assert session.steps[7].url.endswith("/search?q=mug&category=&sort=")


def with_group_killed(pgid: int) -> None:
    """Stop Chromium and the Playwright driver the killed process left behind (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def test_screenshot_and_accessibility_tree_options(viewer_sessions: dict[str, Path]) -> None:
    step = load_session(viewer_sessions["demo.feed-and-preferences"]).steps[1]
    assert base64.b64decode(step.active_tab.screenshot_png).startswith(b"\x89PNG")
    assert step.active_tab.ax_tree and step.active_tab.ax_tree["nodes"]


def test_an_action_browsergym_could_not_carry_out_is_loud_and_played_again(
    demo_site: DemoSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BrowserGym reports a failed action in the observation and goes on; the scripted agent does not.

    Filling a heading is refused by Playwright (not an input) every time: with ``reset`` the episode is
    played from a reset site up to ``EPISODE_ATTEMPTS`` times (two here, three by default), then
    `ActionFailed` is raised; no partial file is left.
    """
    assert agent.EPISODE_ATTEMPTS == 3
    monkeypatch.setattr(agent, "EPISODE_ATTEMPTS", 2)
    episode = Episode("demo.fill-a-heading", "an action that cannot be done", (("fill", "#page-title", "x"),))
    resets: list[int] = []

    def reset() -> None:
        resets.append(1)
        demo_site.reset()

    with pytest.raises(ActionFailed, match=r"^fill\('\d+', 'x'\): "):
        run_episode(episode, demo_site.base_url, tmp_path, reset=reset)
    assert len(resets) == 2
    with pytest.raises(ActionFailed):
        run_episode(episode, demo_site.base_url, tmp_path)  # without reset: not played again
    assert len(resets) == 2
    assert list(tmp_path.iterdir()) == []
