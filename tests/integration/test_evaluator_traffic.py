"""Traffic of the live evaluator's own tabs is tagged and kept out of the agent's HAR by default.

Reproduces what WebArena's program_html evaluator does inside BrowserGym's ``validate()``: open a
new tab in the agent's context, navigate it elsewhere, read it, close it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from cdp_integration import CDPSessionLogger, load_session, session_to_har
from cdp_integration.demo import DemoSite

pytestmark = pytest.mark.integration


def test_evaluator_tab_traffic_is_tagged_and_left_out(
    browser: Browser, demo_site: DemoSite, tmp_path: Path
) -> None:
    base = demo_site.base_url
    context = browser.new_context()
    page = context.new_page()
    logger = CDPSessionLogger(tmp_path)
    logger.attach_to_page(page)
    page.goto(f"{base}/products/5")
    with logger.evaluation_phase():  # as BrowserGym's _task_validate is wrapped
        probe = context.new_page()
        probe.goto(f"{base}/admin/orders")
        probe.content()
        probe.close()
    logger.capture_state_snapshot("action", action="goto")
    path = logger.save_session("evaluator-traffic")
    context.close()

    step = load_session(path).steps[0]
    assert [t.url for t in step.tabs] == [f"{base}/products/5"]  # the evaluator's tab is not the agent's
    documents = [
        (e.request.url, e.origin, e.response.status)
        for e in step.network
        if e.request.resource_type == "Document"
    ]
    assert documents == [
        (f"{base}/products/5", "agent", 200),
        (f"{base}/admin/orders", "evaluator", 302),  # before any CDP session could attach to the new tab
        (f"{base}/login?next=/admin/orders", "evaluator", 200),
    ]
    assert all(e.origin == "agent" for e in step.network if e.tab_id == step.tabs[0].tab_id)

    session = load_session(path)
    agent_urls = [e["request"]["url"] for e in session_to_har(session)["log"]["entries"]]
    assert f"{base}/products/5" in agent_urls
    assert not any("/admin" in url or "/login" in url for url in agent_urls)
    every_url = [
        e["request"]["url"] for e in session_to_har(session, include_evaluator=True)["log"]["entries"]
    ]
    assert f"{base}/admin/orders" in every_url
