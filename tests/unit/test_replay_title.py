"""``page.title()`` offline is ``document.title`` of the captured DOM, not the browser's tab record of it.

A script that sets ``document.title`` rewrites the ``<title>`` element at once; Chromium's target info
(the tab's title the capture also records) lags it. Found by the trajectory generator on a hash-routed
app: live ``title()`` gave the new title, offline the tab record's old one.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from cdp_integration.replay import replay_step
from cdp_integration.session.store import load_session

GOLDEN = Path(__file__).parents[1] / "fixtures" / "sessions" / "v2" / "10024.failure.session.jsonl.gz"


def test_title_comes_from_the_captured_dom_when_the_tab_record_lags() -> None:
    session = load_session(GOLDEN)
    final = session.final_step
    tab = final.active_tab
    assert tab is not None and tab.html is not None
    live_title = replay_step(session, -1).title()
    assert live_title and live_title == tab.title  # the golden's records agree
    html = re.sub(
        r"(<title\b[^>]*>).*?(</title>)", r"\1\n  Renamed  by   a script\n\2", tab.html, count=1, flags=re.S
    )
    assert html != tab.html
    lagging = tab.model_copy(update={"html": html})  # the tab record still has the old title
    step = final.model_copy(update={"tabs": [lagging if t is tab else t for t in final.tabs]})
    renamed = dataclasses.replace(session, steps=(*session.steps[:-1], step))
    assert replay_step(renamed, -1).title() == "Renamed by a script"
