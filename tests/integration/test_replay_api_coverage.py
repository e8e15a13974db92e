"""Every JavaScript locator and prep_action of WebArena's program_html tasks runs on a replayed page.

The expressions come from libwebarena's shipped ``test.raw.json``; the page is a real demo session's
final step with no recorded answers, so everything runs in the sandboxed offline browser. A
JavaScript exception thrown by an expression itself is fine (the live page would throw it too: the
demo shop is not Magento); any other failure is a defect of the mock.
"""

from __future__ import annotations

import html
import importlib.resources
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from cdp_integration.errors import ReplayMissError
from cdp_integration.replay import replay_step
from cdp_integration.replay.recorded import replay_http
from cdp_integration.session.models import MarkedAttributes
from cdp_integration.session.store import Session, load_session


def _program_html_configs() -> list[dict]:
    import webarena

    configs = json.loads(importlib.resources.files(webarena).joinpath("test.raw.json").read_text())
    return [config for config in configs if "program_html" in config["eval"]["eval_types"]]


@pytest.fixture(scope="module")
def demo_session(viewer_sessions: dict[str, Path]) -> Session:
    """The signed-in review episode (the session the debug viewer tests show too)."""
    return load_session(viewer_sessions["demo.search-and-review"])


def _unmarked(page_html: str, marks: Sequence[MarkedAttributes]) -> str:
    """``page_html`` without the ``value``/``checked`` attributes of the tags BrowserGym marked."""
    bids = {mark.bid for mark in marks}

    def tag(match: re.Match[str]) -> str:
        bid = re.search(r' bid="([^"]*)"', match[0])
        return re.sub(r' (value="[^"]*"|checked="")', "", match[0]) if bid and bid[1] in bids else match[0]

    return re.sub(r"<[a-zA-Z][^>]*>", tag, page_html)


def _marked_tag(page_html: str, bid: str, mark: MarkedAttributes) -> str:
    """The one start tag of ``bid`` in ``page_html``, checked to hold the ``value``/``checked`` of ``mark``."""
    (start,) = re.findall(rf'<[a-zA-Z][^>]* bid="{re.escape(bid)}"[^>]*>', page_html)
    if mark.value is not None:
        assert f' value="{html.escape(mark.value, quote=True)}"' in start, (start, mark)
    if mark.checked is not None:
        assert (' checked=""' in start) == mark.checked, (start, mark)
    return start


_GUARD_REASONS = ("depends on CSS", "dispatches", "scripts do not run")
"""Why ``replay.guard`` refuses an expression whose offline answer could differ from live."""


def test_every_program_html_expression_runs_offline(demo_session: Session) -> None:
    import webarena.evaluation_harness.evaluators as evaluators

    configs = _program_html_configs()
    assert len(configs) == 411
    targets = [target for config in configs for target in config["eval"]["program_html"]]
    unique = {(t["locator"], tuple(t.get("prep_actions", ()))) for t in targets}
    counts: Counter[str] = Counter()
    failures: list[str] = []
    captured_html = demo_session.final_step.html
    marks = demo_session.final_step.active_tab.marked_attributes
    assert marks  # BrowserGym wrote value attributes on the agent's page (its buttons' value="")
    for locator, prep_actions in sorted(unique):
        page = replay_step(demo_session, evaluation=None)
        for prep in prep_actions:
            try:
                page.evaluate(f"() => {prep}")
                counts["prep_action ran"] += 1
            except PlaywrightError:
                counts["prep_action threw (its own JS)"] += 1
            except ReplayMissError as exc:
                assert any(reason in str(exc) for reason in _GUARD_REASONS), exc
                counts["prep_action refused (scripts/CSS)"] += 1
            except Exception as exc:
                failures.append(f"prep {prep!r}: {type(exc).__name__}: {exc}")
        if not locator.strip():
            content = page.content()
            assert _unmarked(content, marks) == _unmarked(captured_html, marks)
            assert all(_marked_tag(content, mark.bid, mark) for mark in marks)
            counts["empty locator -> content()"] += 1
        elif locator.startswith(("document.", "[...document.")):
            try:
                page.evaluate(f"() => {locator}")
                counts["js locator ran"] += 1
            except PlaywrightError:
                counts["js locator threw (its own JS)"] += 1
            except ReplayMissError as exc:
                assert any(reason in str(exc) for reason in _GUARD_REASONS), exc
                counts["js locator refused (scripts/CSS)"] += 1
            except Exception as exc:
                failures.append(f"locator {locator!r}: {type(exc).__name__}: {exc}")
        elif locator.startswith("func:"):
            expression = locator.split("func:")[1].replace("__page__", "page")
            with replay_http([]):  # nothing recorded: helpers that call REST APIs must say so clearly
                try:
                    eval(expression, vars(evaluators), {"page": page})
                    counts["func locator ran"] += 1
                except ReplayMissError as exc:
                    assert "no recorded HTTP answer" in str(exc) and "/rest/" in str(exc)
                    counts["func locator -> ReplayMissError"] += 1
                except Exception as exc:
                    failures.append(f"func {locator!r}: {type(exc).__name__}: {exc}")
        else:
            failures.append(f"unknown locator form {locator!r}")
        page.close()
    print("\nprogram_html expressions over a replayed demo page (unique locator+prep pairs):")
    for kind, n in sorted(counts.items()):
        print(f"  {kind:34} {n}")
    assert not failures, "\n".join(failures[:10])
    assert counts["js locator ran"] > 0 and counts["func locator ran"] > 0
    assert counts["func locator -> ReplayMissError"] > 0 and counts["empty locator -> content()"] == 1
