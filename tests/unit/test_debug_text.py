"""``visible_text``: what a reader sees on a captured page; ``find_element``: an element by attribute."""

from __future__ import annotations

from cdp_integration.debug import visible_text
from cdp_integration.replay.text import find_element


def test_scripts_styles_head_and_hidden_elements_give_no_text() -> None:
    html = """<!DOCTYPE html><html><head><title>Tab title</title><style>p { color: red }</style>
    <script>document.write("<p>from a script</p>")</script></head><body>
    <p>shown</p><p hidden>hidden attribute</p><div style="color: red; display: none">display none</div>
    <span style="visibility:hidden">invisible</span><template><p>template</p></template>
    <noscript>enable JavaScript</noscript><dialog>closed dialog</dialog><dialog open>open dialog</dialog>
    <input type="hidden" value="csrf-token"><svg><text>svg label</text></svg></body></html>"""
    assert visible_text(html).splitlines() == ["shown", "open dialog"]


def test_block_elements_break_lines_and_inline_whitespace_collapses() -> None:
    html = "<body><h1>Title</h1><div>one\n   <b>two</b>  <a href='/x'>three</a></div>line<br>break<ul><li>a</li><li>b</li></ul></body>"
    assert visible_text(html) == "Title\none two three\nline\nbreak\na\nb"


def test_table_cells_are_tab_separated_and_pre_keeps_its_whitespace() -> None:
    html = "<table><tr><th>name</th><th>price</th></tr><tr><td>Mug</td><td>$24.00</td></tr></table><pre>  x = 1\n  y = 2</pre>"
    assert visible_text(html).splitlines() == ["name\tprice", "Mug\t$24.00", "  x = 1", "  y = 2"]


def test_form_controls_show_what_they_display() -> None:
    html = """<form><label>User <input name="u" value="emma"></label>
    <label>Password <input type="password" value="secret"></label>
    <label>Empty <input name="e"></label>
    <select><option value="1">One</option><option value="2" selected>Two</option></select>
    <textarea>typed text</textarea><input type="checkbox" checked> agree
    <input type="submit" value="Send"><button>Go</button></form>"""
    line = visible_text(html)
    assert line == "User [emma] Password [••••] Empty [Two] [typed text] [x] agree Send Go"
    assert "secret" not in line and "One" not in line


def test_closed_details_shows_only_its_summary_and_entities_are_decoded() -> None:
    html = "<details><summary>More &amp; less</summary><p>folded</p></details><details open><summary>S</summary><p>unfolded</p></details><p>caf&eacute; &#36;5 &lt;b&gt;</p>"
    assert visible_text(html).splitlines() == ["More & less", "S", "unfolded", "café $5 <b>"]


def test_empty_or_missing_html_has_no_text() -> None:
    assert visible_text(None) == "" and visible_text("") == "" and visible_text("<html></html>") == ""


def test_find_element_by_browsergym_id() -> None:
    html = '<form><label bid="4">Name <input bid="5" name="n"></label><button bid="7" id="go"><b>Sign</b> In</button></form>'
    button = find_element(html, "bid", "7")
    assert button is not None
    assert (button.tag, button.attrs["id"], button.text) == ("button", "go", "Sign In")
    field = find_element(html, "bid", "5")
    assert field is not None and (field.tag, field.attrs["name"], field.text) == ("input", "n", "")
    assert find_element(html, "bid", "99") is None
    assert find_element(None, "bid", "7") is None


def test_visible_text_shows_what_was_typed_checked_and_selected() -> None:
    from cdp_integration.session.models import FormControlState

    page = (
        '<html><head></head><body><form><label>Username <input id="username" name="username" value=""></label>'
        '<textarea name="body">default</textarea><select id="size"><option>S</option><option>M</option></select>'
        '<input type="checkbox" id="agree"><input id="other"></form></body></html>'
    )
    typed = [
        FormControlState(path=[5], tag="input", id="username", name="username", value="emma"),
        FormControlState(path=[6], tag="textarea", name="body", value="typed text"),
        FormControlState(path=[7], tag="select", id="size", selected=[1]),
        FormControlState(path=[10], tag="input", type="checkbox", id="agree", checked=True),
        FormControlState(path=[11], tag="input", id="moved", value="not here: another element at 11"),
    ]
    assert visible_text(page) == "Username [default] [S] [ ]"
    assert visible_text(page, typed) == "Username [emma] [typed text] [M] [x]"


def test_typed_values_inside_a_declarative_shadow_root_are_shown_at_their_path() -> None:
    """The step text and the viewer share one element counter (``ControlWalk``): a control inside an
    open shadow root is addressed as (host, index inside the root), like the capture addresses it."""
    from cdp_integration.replay.text import ControlWalk
    from cdp_integration.session.models import FormControlState

    html = (
        "<html><head></head><body><my-form><template shadowrootmode='open'>"
        "<label>Name</label><input id='inner'></template></my-form>"
        "<noscript><input id='not-an-element'></noscript><input id='outer'></body></html>"
    )
    # live: html 0, head 1, body 2, my-form 3, noscript 4, input#outer 5; in the root: label 0, input 1
    state = [
        FormControlState(path=[3, 1], tag="input", id="inner", value="typed inside"),
        FormControlState(path=[5], tag="input", id="outer", value="typed outside"),
    ]
    text = visible_text(html, state)
    assert "[typed inside]" in text and "[typed outside]" in text
    walk = ControlWalk(state)
    found = {}
    for tag, attrs in [("html", []), ("head", []), ("body", []), ("my-form", []),
                       ("template", [("shadowrootmode", "open")]), ("label", []),
                       ("input", [("id", "inner")])]:  # fmt: skip
        found[tag] = walk.start(tag, attrs).control
    assert found["input"] is state[0] and found["label"] is None
