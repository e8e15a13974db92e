"""OpenStreetMap stand-in (search, place pages with ``#sidebar_content``, directions), plus the homepage
with WebArena's deterministic LLM judge at ``/v1/chat/completions``."""

from __future__ import annotations

import json
import re

from cdp_integration.demo.site import judge_reply
from tests.standins.server import Request, Response, SiteApp, esc, json_response, not_found, page

PLACES = {
    "relation/188553": "Pittsburgh, Allegheny County, Pennsylvania, United States",
    "relation/188022": "Philadelphia, Philadelphia County, Pennsylvania, United States",
    "way/4575210": "Mackinac Bridge, Mackinaw City, Michigan, United States",
    "way/40501001": "Golden Gate Bridge, San Francisco, California, United States",
    "way/9001": "Acadia National Park, Hancock County, Maine, United States",
}
ENGINES = (
    ("fossgis_osrm_bike", "Bicycle (OSRM)"),
    ("fossgis_osrm_car", "Car (OSRM)"),
    ("fossgis_osrm_foot", "Foot (OSRM)"),
)
ROUTES = {
    ("boston", "acadia national park", "fossgis_osrm_car"): ("457km", "4h 49min"),
    ("bangor", "acadia national park", "fossgis_osrm_car"): ("74km", "1h 23min"),
}


class OpenStreetMap(SiteApp):
    name = "map"

    def __init__(self) -> None:
        super().__init__()
        self.route("GET", r"/", self.home)
        self.route("GET", r"/search", self.search)
        self.route("GET", r"/directions", self.directions)
        self.route("GET", r"/((?:relation|way|node)/\d+)", self.place)

    def _page(self, title: str, sidebar: str, extra: str = "") -> Response:
        return page(
            title,
            '<div id="content"><div id="sidebar"><form action="/search" method="get">'
            '<input id="query" name="query" aria-label="Search" placeholder="Search"><button type="submit">Go</button></form>'
            f'<a href="/directions">Find directions</a>{extra}<div id="sidebar_content">{sidebar}</div></div><div id="map"></div></div>',
        )

    def home(self, r: Request, m: re.Match[str]) -> Response:
        return self._page("OpenStreetMap", "<h2>Welcome to OpenStreetMap!</h2>")

    def search(self, r: Request, m: re.Match[str]) -> Response:
        words = r.query.get("query", "").lower().split()
        hits = [(k, v) for k, v in PLACES.items() if words and all(w in v.lower() for w in words[:2])]
        items = "".join(f'<li><a class="search-result" href="/{k}">{esc(v)}</a></li>' for k, v in hits)
        return self._page(
            "Search",
            f"<h2>Search Results</h2><ul class='results'>{items or '<li>No results found</li>'}</ul>",
        )

    def place(self, r: Request, m: re.Match[str]) -> Response:
        name = PLACES.get(m[1])
        if name is None:
            return not_found()
        return self._page(name, f"<h2>{esc(name.split(',')[0])}</h2><p class='address'>{esc(name)}</p>")

    def directions(self, r: Request, m: re.Match[str]) -> Response:
        origin, target = r.query.get("route_from", ""), r.query.get("route_to", "")
        engine = r.query.get("engine", ENGINES[0][0])
        options = "".join(
            f'<option value="{v}"{" selected" if v == engine else ""}>{t}</option>' for v, t in ENGINES
        )
        form = (
            '<form class="directions_form" action="/directions" method="get">'
            f'<select class="routing_engines" name="engine" aria-label="Engine">{options}</select>'
            f'<input name="route_from" aria-label="From" value="{esc(origin)}">'
            f'<input name="route_to" aria-label="To" value="{esc(target)}"><button type="submit">Go</button></form>'
        )
        found = next(
            (
                v
                for (a, b, e), v in ROUTES.items()
                if e == engine and a in origin.lower() and b in target.lower()
            ),
            None,
        )
        summary = (
            f'<p id="routing_summary">{esc(target)}: Distance: {found[0]}. Time: {found[1]}.</p>'
            if found
            else ""
        )
        return self._page("Directions", summary, extra=form)


class Homepage(SiteApp):
    """WebArena's homepage; also the OpenAI-compatible judge the fuzzy_match evaluator calls."""

    name = "homepage"

    def __init__(self) -> None:
        super().__init__()
        self.route("GET", r"/", lambda r, m: page("Homepage", "<h1>WebArena</h1>"))
        self.route("POST", r"/v1/chat/completions", self.judge)

    def judge(self, r: Request, m: re.Match[str]) -> Response:
        try:
            body = json.loads(r.body)
            prompt = next(str(x["content"]) for x in reversed(body["messages"]) if x.get("role") == "user")
        except (ValueError, KeyError, TypeError, StopIteration):
            return json_response({"error": {"message": "bad request"}}, 400)
        verdict = judge_reply(prompt)
        if verdict is None:
            return json_response({"error": {"message": "not a WebArena judge prompt"}}, 400)
        return json_response(
            {
                "id": "chatcmpl-standin",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": str(body.get("model", "judge")),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": verdict},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )
