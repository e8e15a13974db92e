"""Redaction on real episodes: redacted sessions still score like the live run, and no secret survives.

Demo tasks spanning string_match, url_match and program_html are played live with capture; each
session file is redacted with ``redact_file``. Offline scores of the redacted files must equal the
originals' and the live rewards, except where the evaluator itself signs in with a password (the
REST helpers behind ``func:shopping_get_latest_order_url()``): that evaluation reads a secret, so its
replay must fail loudly (a replay miss naming the request), never give a different score.

The removal proof runs over those episodes plus the crafted corpus of ``tests/unit/test_redact.py``:
every secret an independent collector finds in an original (cookie values, secret header values,
password values, token parameters, credentials and tokens of the evaluator's REST calls) is absent
from the redacted file's bytes, compressed and decompressed, raw, JSON-, URL- and HTML-escaped.
Finally ``CDPSessionLogger(redact=True)`` signs in to the demo shop by typing a password: neither
the ``.partial`` file mid-episode nor the final file ever holds it or the session cookie.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from cdp_integration.capture.logger import CDPSessionLogger
from cdp_integration.demo import DemoSite
from cdp_integration.demo.job import DemoEpisode
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.replay import replay_step
from cdp_integration.session.models import Step
from cdp_integration.session.redact import PLACEHOLDER_PATTERN, redact_file
from cdp_integration.session.store import Session, load_session
from tests.unit.test_redact import (
    BODY_SECRET,
    assert_no_secret_survives,
    crafted_session,
    original_secrets,
    write,
)

pytestmark = pytest.mark.integration

TASKS = (10000, 10014, 10024, 10027, 10039)
"""string_match; url_match; program_html as the signed-in admin; program_html through the evaluator's
REST login (reads a secret); url_match + program_html."""

DEMO_PASSWORD = "emma1234"
"""The demo shop's password for ``emma`` (``demo/state.py``)."""


@pytest.fixture(scope="module")
def episodes(demo_corpus: list[DemoEpisode]) -> list[DemoEpisode]:
    """The successful trajectories of ``TASKS`` from the demo corpus."""
    chosen = [e for e in demo_corpus if e.task_id in TASKS and e.trajectory == "success"]
    assert [e.task_id for e in chosen] == list(TASKS)
    return chosen


@pytest.fixture(scope="module")
def redacted(episodes: list[DemoEpisode], tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """Original session file -> its redacted copy."""
    directory = tmp_path_factory.mktemp("redacted")
    copies = {}
    for episode in episodes:
        copies[episode.session] = directory / episode.session.name
        redact_file(episode.session, copies[episode.session])
    return copies


def _evaluator_signs_in(session: Session) -> bool:
    """The evaluator sent credentials over HTTP (WebArena's REST helpers get an admin token)."""
    evaluations = [step.evaluation for step in session.steps] + [session.end.probe if session.end else None]
    return any(
        "password" in (call.request_body or "") for e in evaluations if e is not None for call in e.http
    )


def test_redacted_sessions_score_like_the_originals_and_the_live_run(
    episodes: list[DemoEpisode], redacted: dict[Path, Path], no_sockets: list[object]
) -> None:
    compared, signing_in = [], []
    for episode in episodes:
        original, copy = load_session(episode.session), load_session(redacted[episode.session])
        assert copy.complete and len(copy.steps) == len(original.steps)
        if _evaluator_signs_in(original):  # its recorded REST sign-in now holds a placeholder
            signing_in.append(episode.task_id)
        before, after = evaluate_session(original), evaluate_session(copy)
        assert after.score == before.score == episode.live, episode
        assert after.max_score == before.max_score == episode.live_max, episode
        assert [s.score for s in after.steps] == [s.score for s in before.steps], episode
        assert [step.html for step in copy.steps] == [step.html for step in original.steps]  # untouched
        assert replay_step(copy).url == replay_step(original).url
        compared.append(episode.task_id)
    assert len(compared) == len(episodes) and signing_in == [10027], (compared, signing_in)
    assert no_sockets == []


def test_no_secret_survives_anywhere_in_the_corpus(
    episodes: list[DemoEpisode], redacted: dict[Path, Path], tmp_path: Path
) -> None:
    corpus = {episode.session: redacted[episode.session] for episode in episodes}
    crafted, planted = crafted_session()
    for name, session in {
        "crafted": crafted,
        "crafted-partial": Session(crafted.header, crafted.steps),
    }.items():
        source = write(session, tmp_path / f"{name}.session.jsonl.gz")
        corpus[source] = tmp_path / f"{name}.redacted.session.jsonl.gz"
        redact_file(source, corpus[source])
    found: dict[str, set[str]] = {}
    for source, copy in corpus.items():
        secrets = original_secrets(load_session(source))
        if source.name.startswith("crafted"):
            secrets |= set(planted) - {BODY_SECRET}
        assert secrets, source  # nothing to prove would prove nothing
        assert_no_secret_survives(copy, secrets)
        found[source.name] = secrets
    print("\nsecrets proven absent:", {name: len(secrets) for name, secrets in found.items()})
    token_task = next(source for source in corpus if source.name.startswith("10027."))
    session_cookie = load_session(token_task).final_step.cookies[0].value
    assert {"admin1234", session_cookie} <= found[token_task.name]  # the evaluator's password, the cookie
    assert any(len(secret) == 32 and secret.isalnum() for secret in found[token_task.name])  # REST token


def _inflated(path: Path) -> bytes:
    return zlib.decompressobj(47).decompress(path.read_bytes())


def test_logger_redacts_at_capture_time(browser: Browser, demo_site: DemoSite, tmp_path: Path) -> None:
    """Sign in by typing a password: no file the logger writes ever holds it, nor the session cookie."""
    context = browser.new_context()
    page = context.new_page()
    logger = CDPSessionLogger(tmp_path, instance_id="login.redacted", redact=True)
    partial_contents: list[bytes] = []
    try:
        page.goto(f"{demo_site.base_url}/login")
        logger.attach_to_page(page)
        logger.capture_state_snapshot("open")
        page.fill("#username", "emma")
        page.fill("#password", DEMO_PASSWORD)
        logger.capture_state_snapshot("action", action=f"fill('#password', {DEMO_PASSWORD!r})")
        assert logger.partial_path is not None
        partial_contents.append(_inflated(logger.partial_path))
        with page.expect_navigation():
            page.click("#login-button")
        logger.capture_state_snapshot("action", action="click('#login-button')")
        partial_contents.append(_inflated(logger.partial_path))
        cookies = {cookie["value"] for cookie in context.cookies() if len(cookie["value"]) >= 6}
        path = logger.save_session()
    finally:
        logger.detach()
        context.close()
    assert page.url.endswith("/account") and cookies  # signed in: a fresh session cookie
    secrets = {DEMO_PASSWORD, *cookies}
    for content in partial_contents:
        assert not any(secret.encode() in content for secret in secrets)
    assert_no_secret_survives(path, secrets)

    session = load_session(path)
    assert session.header.options["redacted"] is True and session.complete
    typed, signed_in = session.steps[1], session.steps[2]
    assert typed.action is not None and PLACEHOLDER_PATTERN.search(typed.action)
    assert _typed_password(typed).startswith("REDACTED-password-")  # the capture did see it
    login_post = next(x for x in signed_in.network if x.request.method == "POST")
    assert "password=REDACTED-password-" in (login_post.request.post_data or "")
    assert "username=emma" in (login_post.request.post_data or "")
    assert all(PLACEHOLDER_PATTERN.fullmatch(cookie.value) for cookie in signed_in.cookies)


def _typed_password(step: Step) -> str:
    """The typed value of the password field: from the form state (a redacting logger takes no DOM
    snapshot of its own when it reads form state), else the snapshot's ``inputValue``."""
    typed = [c.value for c in step.tabs[0].form_state if c.type == "password"]
    if typed:
        assert step.tabs[0].dom_snapshot is None
        return str(typed[0])
    snapshot = step.tabs[0].dom_snapshot or {}
    strings, nodes = snapshot["strings"], snapshot["documents"][0]["nodes"]
    for node, pairs in enumerate(nodes["attributes"]):
        attributes = {strings[pairs[i]]: strings[pairs[i + 1]] for i in range(0, len(pairs), 2)}
        if attributes.get("type") == "password":
            position = nodes["inputValue"]["index"].index(node)
            return str(strings[nodes["inputValue"]["value"][position]])
    raise AssertionError("no password input in the snapshot")
