"""The viewer's data and its inert DOM copies (the Chromium test opens the real file)."""

from __future__ import annotations

import re

import orjson

from cdp_integration.debug.viewer import CSP, collect_resources, episode_data, inert_html, render_viewer
from cdp_integration.session import Session, TabState
from cdp_integration.session.models import FormControlState
from tests.unit.test_debug_diff import ACCOUNT_HTML, LOGIN_HTML, ORIGIN, make_session

PAGE = """<!DOCTYPE html><html><head><base href="http://evil.test/"><meta http-equiv="refresh" content="0;url=/x">
<script src="/app.js"></script><noscript><img src="/pixel.gif"></noscript>
<link rel="stylesheet" href="/static/site.css"><link rel="icon" href="/favicon.ico"><link rel="preload" href="/font.woff2">
</head><body onload="track()"><a href="/next" target="_blank" onclick="go()">next</a>
<img src="/static/logo.png" srcset="/big.png 2x"><img src="/not-captured.png" alt="gone">
<form action="/login"><button formaction="/other" bid="7">Sign &amp; go</button></form>
<iframe src="/ad" srcdoc="<script>x()</script>"></iframe><object data="/flash.swf"></object>
<div style="background: url(/bg.png)">styled</div><svg><use xlink:href="/sprite.svg#i"></use></svg></body></html>"""


def test_nothing_in_the_inert_copy_runs_or_fetches() -> None:
    resources = collect_resources(make_session())
    page = inert_html(PAGE, f"{ORIGIN}/account", resources=resources).html
    assert "<script" not in page and "noscript" not in page and "<base" not in page and "refresh" not in page
    assert not re.search(r"\son\w+=", page)  # no event handler attribute
    assert "srcdoc" not in page and "target=" not in page and "<object" not in page
    # every attribute that could fetch is renamed (kept for reading) or replaced by inlined data
    assert not re.search(r'\s(src|href|srcset|action|formaction|xlink:href|data)="(?!#|data:)', page)
    assert '<a href="#" data-href="/next">next</a>' in page
    assert 'data-src="/not-captured.png" alt="gone"' in page
    assert 'data-action="/login"' in page and 'data-formaction="/other"' in page
    # the captured stylesheet and image are inlined; the icon and preload links are dropped
    assert (
        "<style>h1 { color: rgb(1, 2, 3) }</style>" in page
        and "favicon" not in page
        and "font.woff2" not in page
    )
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" data-srcset="/big.png 2x">', page)
    # the CSP comes first in <head>, before anything could load
    assert page.startswith(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
    )
    assert "Sign &amp; go" in page  # text is kept byte for byte


def test_stylesheets_without_a_captured_body_are_counted_and_next_target_outlined() -> None:
    page = inert_html(ACCOUNT_HTML, f"{ORIGIN}/account", highlight="9")
    assert page.missing_stylesheets == 1 and "<link" not in page.html
    assert '[bid="9"]{outline:3px solid #e11d48' in page.html
    assert "outline" not in inert_html(ACCOUNT_HTML, ORIGIN, highlight='9"]{}*{x').html  # not a plain id


def test_a_fragment_without_head_gets_the_policy_first() -> None:
    page = inert_html("<p onclick='x()'>hi</p>", ORIGIN).html
    assert page == f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><p>hi</p>'


def test_episode_data_holds_each_step_and_its_changes() -> None:
    data = episode_data(make_session())
    assert (data["instance_id"], data["task"], data["final_answer"], data["complete"]) == (
        "demo.unit",
        "Find the account holder's name.",
        "Emma",
        True,
    )
    steps = data["steps"]
    assert [s["index"] for s in steps] == [0, 1, 2, 3, 4]
    signed_in = steps[2]
    assert signed_in["target"] == "[button] Sign In"  # from step 1's HTML, where the agent clicked
    assert signed_in["document_status"] == "302→200"
    assert signed_in["evaluation"]["label"] == "1" and signed_in["evaluation"]["source"] == "validate"
    assert signed_in["viewport"] == (4, 3) and signed_in["screenshot"].startswith("data:image/png;base64,")
    assert [r["status"] for r in signed_in["requests"]] == ["302", "200", "200", "200", "net::ERR_ABORTED"]
    assert signed_in["changes"]["cookies"] == [
        {
            "kind": "added",
            "name": "session",
            "domain": "shop.test",
            "path": "/",
            "before": None,
            "after": "abc",
        }
    ]
    assert signed_in["changes"]["url"] == [f"{ORIGIN}/login", f"{ORIGIN}/account"]
    assert "+My Account" in signed_in["changes"]["text_diff"] and signed_in["changes"]["text_diff"][
        0
    ].startswith("@@")
    assert steps[0]["changes"] is None and steps[0]["next_bid"] == "5"
    assert steps[1]["next_action"] == "click('7')" and steps[1]["next_bid"] == "7"
    assert data["highlight_css"].startswith('[bid="BID"]{outline')  # the viewer outlines next_bid
    assert steps[3]["screenshot"] is None  # the help tab was not screenshotted
    page = data["pages"][steps[1]["page"]]
    assert "<script" not in page and steps[1]["text"] == "Customer Login\nUser [emma] Sign In"


def test_captured_text_cannot_end_the_data_script() -> None:
    session = make_session()
    hostile = "</script><script>alert(1)</script><!--"
    first = session.steps[0]
    tab = TabState(
        tab_id="T1", url=first.url, title=hostile, active=True, html=LOGIN_HTML.format(user=hostile)
    )
    step = first.model_copy(update={"title": hostile, "tabs": [tab]})
    page = render_viewer(Session(header=session.header, steps=(step, *session.steps[1:]), end=session.end))
    assert page.count("</script>") == 2 and "alert(1)" in page  # the JSON and the viewer's own script
    data = page.split('<script type="application/json" id="episode-data">', 1)[1].split("</script>", 1)[0]
    assert orjson.loads(data)["steps"][0]["title"] == hostile
    assert "__EPISODE_DATA__" not in page and "__CSP__" not in page


FORM_PAGE = (
    '<html><head></head><body><form><input id="title" name="title" value="default">'
    '<textarea name="body">default &amp; text</textarea><input type="checkbox" id="agree" checked>'
    '<select id="sizes" multiple><optgroup label="small"><option selected>S</option></optgroup><option>M</option>'
    '<option>L</option></select><input type="password" name="pw"><noscript><input id="not-an-element"></noscript>'
    '<template><input id="inert"></template><input id="renamed"></form>'
    '<div id="host"><template shadowrootmode="open"><p>in shadow</p><input id="inner"></template></div>'
    "</body></html>"
)


def test_the_rendered_copy_shows_what_was_typed_checked_and_selected() -> None:
    def control(path: list[int], tag: str, **fields: object) -> FormControlState:
        return FormControlState(path=path, tag=tag, **fields)  # type: ignore[arg-type]

    typed = [
        control([4], "input", type="text", name="title", id="title", value='Typed "title"'),
        control([5], "textarea", name="body", value="line 1\n<b>line 2</b>"),
        control([6], "input", type="checkbox", id="agree", checked=False),
        control([7], "select", id="sizes", selected=[1, 2], selected_text=["M", "L"]),
        control([12], "input", type="password", name="pw", value="hunter22"),
        control([15], "input", type="text", id="renamed-live", value="not shown: another element here"),
        control([16, 1], "input", type="text", id="inner", value="in the shadow root"),
        control(
            [2], "input", type="text", id="framed", frame="http://x/frame", value="frames are not rendered"
        ),
    ]
    page = inert_html(FORM_PAGE, ORIGIN, form_state=typed).html
    assert '<input id="title" name="title" value="Typed &quot;title&quot;" data-cdp-form>' in page
    assert '<textarea name="body" data-cdp-form>line 1\n&lt;b&gt;line 2&lt;/b&gt;</textarea>' in page
    assert '<input type="checkbox" id="agree" data-cdp-form>' in page
    assert "<option>S</option></optgroup><option selected>M</option><option selected>L</option>" in page
    assert (
        '<input type="password" name="pw" value="••••••••" data-cdp-form>' in page and "hunter22" not in page
    )
    assert '<input id="renamed">' in page and "another element" not in page
    assert '<input id="inner" value="in the shadow root" data-cdp-form>' in page
    assert "frames are not rendered" not in page and "[data-cdp-form]{outline" in page
    assert inert_html(FORM_PAGE, ORIGIN).html.count("data-cdp-form") == 0


def test_episode_data_lists_the_form_state_and_its_changes() -> None:
    from tests.unit.test_debug_diff import form_session

    steps = episode_data(form_session())["steps"]
    assert steps[1]["form"] == ["typed 'Great mug' into input#title", "checked input[name=agree]"]
    assert steps[1]["changes"]["forms"] == steps[1]["form"]
    assert steps[3]["changes"]["forms"] == ["input#title back to its default (was 'Great mugs')"]
    assert steps[4]["form"] == [] and steps[4]["changes"]["forms"] == []
