"""The page's own ``value``/``checked`` attributes written back into marked HTML, tag by tag."""

from __future__ import annotations

from cdp_integration.capture.marking import restore_attributes

MARKED = (
    '<!DOCTYPE html><html bid="0"><head bid="1"><script bid="2">var s = \'<input bid="3" value="x">\';</script>'
    '</head><body bid="4"><!-- <input bid="3" value="y"> -->'
    '<input title="a value=" bid="3" value="typed &amp; more" class="c">'
    '<input type="checkbox" bid="5" checked=""><input type="checkbox" bid="6">'
    '<li bid="7" value="0">one</li><input bid="8" value=""><p bid="9">text bid="3"</p>'
    '<input bid="10" value="a"><input bid="10" value="b"></body></html>'
)


def test_only_the_listed_attributes_of_the_tag_with_that_bid_change() -> None:
    restored = [
        {"bid": "3", "value": 'page & "own"', "frame": ""},
        {"bid": "5", "checked": False, "frame": ""},
        {"bid": "6", "checked": True, "frame": ""},
        {"bid": "7", "value": None, "frame": ""},
        {"bid": "8", "value": None, "frame": ""},
    ]
    html, done = restore_attributes(MARKED, restored)
    assert done == {  # what the marking had written, for the agent's page offline
        "3": {"tag": "input", "value": "typed & more", "value_at": 2},
        "5": {"tag": "input", "checked": True, "checked_at": 2},
        "6": {"tag": "input", "checked": False},
        "7": {"tag": "li", "value": "0", "value_at": 1},
        "8": {"tag": "input", "value": "", "value_at": 1},
    }
    assert '<input title="a value=" bid="3" value="page &amp; &quot;own&quot;" class="c">' in html
    assert '<input type="checkbox" bid="5">' in html and '<input type="checkbox" bid="6" checked="">' in html
    assert '<li bid="7">one</li><input bid="8"><p bid="9">text bid="3"</p>' in html
    # script text and comments are not tags: left as they were
    assert html.count('value="x"') == 1 and html.count('value="y"') == 1
    assert (
        html.replace('value="page &amp; &quot;own&quot;"', 'value="typed &amp; more"')
        .replace('<input type="checkbox" bid="5">', '<input type="checkbox" bid="5" checked="">')
        .replace('bid="6" checked=""', 'bid="6"')
        .replace('<li bid="7">', '<li bid="7" value="0">')
        .replace('<input bid="8">', '<input bid="8" value="">')
        == MARKED
    )


def test_a_bid_on_two_tags_or_on_none_is_not_restored() -> None:
    html, done = restore_attributes(MARKED, [{"bid": "10", "value": None}, {"bid": "99", "value": None}])
    assert (html, done) == (MARKED, {})
    assert restore_attributes("<p>no marks</p>", [{"bid": "1", "value": None}]) == ("<p>no marks</p>", {})


def test_a_value_attribute_the_marking_left_out_is_none() -> None:
    _, done = restore_attributes(
        '<input bid="1"><input bid="2" value>', [{"bid": "1", "value": "x"}, {"bid": "2", "value": "x"}]
    )
    assert done == {"1": {"tag": "input", "value": None}, "2": {"tag": "input", "value": "", "value_at": 1}}
