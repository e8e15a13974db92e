"""The differential checker itself: it finds a difference when there is one, and its questions are
reproducible. (Its sample over the conformance episodes is in ``test_conformance.py``; its full run is
``make check-fidelity``.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdp_integration import CDPSessionLogger, load_session
from tests.conformance.differential import EpisodeProbe, format_report, format_silent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def shop_page() -> Iterator[tuple[Any, str]]:
    """A live page of the demo shop's product review form (plain Playwright, system Chromium)."""
    import browsergym.core

    from cdp_integration import environment
    from cdp_integration.demo import DemoSite

    with DemoSite() as site:
        browser = browsergym.core._get_global_playwright().chromium.launch(
            executable_path=environment.headless_executable(),
            args=list(environment.CHROMIUM_ARGS),
            headless=True,
        )
        try:
            page = browser.new_page()
            page.goto(site.base_url + "/search?q=skillet")
            page.click("#results .product-link")
            page.wait_for_load_state("load")
            yield page, site.base_url
        finally:
            browser.close()


def test_a_change_the_capture_never_saw_is_reported_with_both_answers(
    shop_page: tuple[Any, str], tmp_path: Path
) -> None:
    """Typing into a field after the step was captured: the live ``.value`` is what was typed, the
    session's is the default, and the checker must say so (it cannot be a loud miss or equal)."""
    page, _ = shop_page
    logger = CDPSessionLogger(tmp_path, task={})
    logger.attach_to_page(page)
    try:
        logger.capture_state_snapshot("product page")
        page.fill("#review-title-input", "typed after the capture")  # no capture sees this
        probe = EpisodeProbe("demo", "self-test", seed=3, per_step=5)
        probe.ask_live(page, 0, captured=logger.last_step, fresh=False)
        session = load_session(logger.save_session("self-test"))
    finally:
        logger.detach()
    outcomes = probe.answer_offline(session)
    silent = [o for o in outcomes if o.verdict == "silent"]
    assert [o.live for o in silent] == ["typed after the capture"], [
        format_silent("self-test", o) for o in silent
    ]
    assert silent[0].offline == "" and "#review-title-input" in silent[0].question.describe()
    assert "typed after the capture" in format_silent("self-test", silent[0])
    report = format_report({"demo": outcomes})
    assert report.splitlines()[1].split()[:2] == ["demo", str(len(outcomes))]
    assert sum(o.verdict == "equal" for o in outcomes) == len(outcomes) - 1


def test_questions_depend_only_on_the_seed_and_the_page(shop_page: tuple[Any, str]) -> None:
    page, _ = shop_page

    def questions(seed: int) -> list[Any]:
        probe = EpisodeProbe("demo", "seeded", seed=seed, per_step=40)
        probe.ask_live(page, 0, fresh=False)
        return [question for question, _ in probe.asked]

    first, again, other = questions(7), questions(7), questions(8)
    assert first == again
    assert first != other
    kinds = {question.kind for question in first}
    assert {"form", "text", "count", "location", "title"} <= kinds, kinds
    assert all(question.tab_id for question in first)


def test_only_relative_time_text_is_not_judged() -> None:
    """Trac's "Last modified 17 minutes ago": a capture a minute boundary before the live question."""
    from tests.conformance.differential import _only_relative_time

    assert _only_relative_time("Last modified 17 minutes ago\nNote", "Last modified 16 minutes ago\nNote")
    assert not _only_relative_time("Last modified 17 minutes ago\nNote", "Last modified 16 minutes ago\nNot")
    assert not _only_relative_time("version 17", "version 16")
