"""Crafted session files, made as an attacker would: one builder per hole found in issue 20.

Each builder writes raw records (the bytes an attacker controls, not what ``SessionWriter`` would
produce) and returns the file. Families: **amplification** (a few KB of references that expand to
GBs), **output** (a small file that would become a multi-GB HAR, viewer or export), **value** (a
value no date can hold), **terminal** (escape sequences in titles and URLs), **gzip** (concatenated
members), **viewer** (markup meant to survive the viewer's cleaner). ``scale`` shrinks the cases
for ``make test``; ``scale=1`` is the full size of the issue's report.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import FORMAT_VERSION

MiB = 1024**2
SITE = "http://shop.test"
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b]0;owned\x07\x9b31m"
"""OSC 52 (write the clipboard), clear screen, OSC 0 (window title), a C1 CSI."""
MXSS = (
    "<svg><style><img src=x onerror=alert(1)></style></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(2)></style></mglyph></table></mtext></math>",
    '<noscript><p title="</noscript><img src=x onerror=alert(3)>"></p></noscript>',
    "<template><style></template><img src=x onerror=alert(4)></style></template>",
    '<svg></p><style><a id="</style><img src=1 onerror=alert(5)>"></style></svg>',
    "<svg><a><animate attributeName=href values=javascript:alert(6) /><text y=20>x</text></a></svg>",
    "<!DOCTYPE <img src=x onerror=alert(7)>><p>doc",
    "<math><style><img src=x onerror=alert(8)></style></math>",
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(9)>",
)
"""Known mXSS and namespace-confusion shapes: each would run ``alert`` if a browser found a live
element with an event handler in the cleaned page."""


def _id(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def header(**task: Any) -> dict[str, Any]:
    return {
        "type": "header",
        "format_version": FORMAT_VERSION,
        "created": 0.0,
        "tool": "attacker",
        "task": {"site_urls": {"SHOPPING": SITE}, **task},
    }


def step(index: int, *, html: Any = None, **fields: Any) -> dict[str, Any]:
    url = fields.pop("url", f"{SITE}/")
    title = fields.pop("title", "Shop")
    tab = {"tab_id": "T1", "url": url, "title": title, "active": True, "html": html}
    tab.update(fields.pop("tab", {}))
    record = {
        "type": "step",
        "index": index,
        "trigger": "action",
        "action": f"click('{index}')" if index else None,
        "timestamp": float(index),
        "url": url,
        "title": title,
        "tabs": [tab],
    }
    record.update(fields)
    return record


def end(**fields: Any) -> dict[str, Any]:
    return {"type": "end", "ended": 1.0, "final_answer": "Mug", **fields}


def blob(blob_id: str, data: Any, kind: str | None = None) -> dict[str, Any]:
    record = {"type": "blob", "id": blob_id, "data": data}
    if kind is not None:
        record["kind"] = kind
    return record


def write(path: Path, records: Iterable[dict[str, Any] | bytes], *, level: int = 6) -> Path:
    """``records`` as one gzip stream of JSON lines, streamed (a record may also be raw bytes)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        for record in records:
            line = record if isinstance(record, bytes) else orjson.dumps(record)
            out.write(compressor.compress(line + b"\n"))
        out.write(compressor.flush())
    return path


# -- amplification ------------------------------------------------------------------------------


def text_of_text(path: Path, levels: int = 40) -> Path:
    """Text blobs built from text blobs, each the previous one twice: 2**40 x 4 KB from ~6 KB."""
    records: list[dict[str, Any]] = [header(), blob("t0", "A" * 4096)]
    for level in range(1, levels + 1):
        records.append(blob(f"t{level}", [f"t{level - 1}", f"t{level - 1}"], "text"))
    records += [step(0, html={"$blob": f"t{levels}"}), end()]
    return write(path, records)


def one_chunk_many_times(path: Path, scale: float = 1.0) -> Path:
    """A text blob naming one 1 MiB chunk thousands of times (3,000 at full size: 3 GB)."""
    count = max(1000, int(3000 * scale))
    records = [header(), blob("c", "<p>" + "x" * (MiB - 3)), blob("page", ["c"] * count, "text")]
    return write(path, [*records, step(0, html={"$blob": "page"}), end()])


def dom_chunks_many_times(path: Path, scale: float = 1.0) -> Path:
    """A DOM snapshot whose ``$chunks`` list names one 100k-item list blob 3,000 times."""
    count = max(1000, int(3000 * scale))
    chunk = ["div"] * 100_000
    snapshot = {"documents": [{"documentURL": SITE, "nodes": {"nodeName": {"$chunks": ["l"] * count}}}]}
    records = [header(), blob("l", chunk), blob("snap", snapshot, "dom")]
    return write(path, [*records, step(0, html="<p>x</p>", tab={"dom_snapshot": {"$blob": "snap"}}), end()])


def shared_dict(path: Path, keys: int = 400_000, steps: int = 80) -> Path:
    """One 400k-key object blob referenced by every step's DOM snapshot (920 KB compressed)."""
    snapshot = {f"k{n}": n for n in range(keys)}
    records: list[dict[str, Any]] = [header(), blob("d", snapshot)]
    records += [step(n, html="<p>x</p>", tab={"dom_snapshot": {"$blob": "d"}}) for n in range(steps)]
    return write(path, [*records, end()])


def shared_page(path: Path, size: int = 3 * MiB, steps: int = 150) -> Path:
    """One page with a login form referenced by every step: ``redact`` must not copy it per step."""
    form = '<form><input name="user" value="emma"><input type="password" name="pw" value="hunter2"></form>'
    page = "<html><body>" + form + "<p>" + "lorem ipsum " * (size // 12) + "</p></body></html>"
    records: list[dict[str, Any]] = [header(), blob("p", page)]
    records += [step(n, html={"$blob": "p"}) for n in range(steps)]
    return write(path, [*records, end()])


# -- output -------------------------------------------------------------------------------------


def shared_body(path: Path, exchanges: int = 400, size: int = 10 * MiB) -> Path:
    """``exchanges`` responses sharing one body blob: the HAR and ``show --json`` would be GBs."""
    body = "b" * size
    network = [
        {
            "request_id": f"r{n}",
            "tab_id": "T1",
            "started": 1.0,
            "request": {"method": "GET", "url": f"{SITE}/api/{n}", "headers": {}},
            "response": {"status": 200, "mime_type": "text/plain", "body": {"$blob": "body"}},
        }
        for n in range(exchanges)
    ]
    return write(path, [header(), blob("body", body), step(0, html="<p>x</p>", network=network), end()])


def many_links(path: Path, links: int = 3000, size: int = MiB) -> Path:
    """3,000 ``<link>`` elements to one 1 MiB stylesheet that imports itself: the viewer copied it
    once per link and again per ``@import`` (3 GB)."""
    css = f"@import url({SITE}/site.css);\n" * 50 + "p { color: red }\n" + "/* pad */" * (size // 9)
    page = (
        "<html><head>"
        + f'<link rel="stylesheet" href="{SITE}/site.css">' * links
        + "</head><body>x</body></html>"
    )
    resources = [{"url": f"{SITE}/site.css", "type": "Stylesheet", "mime_type": "text/css", "body": css}]
    return write(path, [header(), step(0, html=page, resources=resources), step(1, html=page), end()])


# -- values -------------------------------------------------------------------------------------


def huge_timestamp(path: Path) -> Path:
    """A timestamp of 1e19 seconds: no date holds it (was an OverflowError traceback)."""
    exchange = {
        "request_id": "r1",
        "tab_id": "T1",
        "started": 1e19,
        "request": {"method": "GET", "url": f"{SITE}/", "headers": {}, "resource_type": "Document"},
        "response": {"status": 200, "mime_type": "text/html"},
    }
    records = [header(task_id=1), step(0, html="<p>x</p>", network=[exchange]), end(ended=1e19)]
    return write(path, records)


# -- terminal -----------------------------------------------------------------------------------


def escape_sequences(path: Path) -> Path:
    """Titles, URLs, actions and the answer carrying ESC / OSC sequences."""
    evil_url = f"{SITE}/{ESCAPES}"
    records = [
        header(goal=f"goal {ESCAPES}"),
        step(0, html=f"<title>{ESCAPES}</title><p>{ESCAPES}</p>", title=ESCAPES, url=evil_url),
        step(1, html=f"<p>after {ESCAPES}</p>", title=f"t {ESCAPES}", url=evil_url, action=ESCAPES),
        end(final_answer=ESCAPES),
    ]
    return write(path, records)


def escape_in_error(path: Path) -> Path:
    """A record type carrying escape sequences: the one-line error must not pass them on."""
    return write(path, [header(), {"type": ESCAPES}])


# -- gzip ---------------------------------------------------------------------------------------


def two_members(path: Path) -> Path:
    """Two concatenated gzip members (what ``cat a.gz b.gz`` makes): ``zcat`` shows all 5 steps."""
    first = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in [header(), step(0), step(1)]))
    second = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in [step(2), step(3), step(4), end()]))
    path.write_bytes(first + second)
    return path


def trailing_garbage(path: Path) -> Path:
    data = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in [header(), step(0), end()]))
    path.write_bytes(data + b"this is not gzip")
    return path


# -- viewer -------------------------------------------------------------------------------------


def mxss_pages(path: Path) -> Path:
    """One step per mXSS shape of ``MXSS``."""
    records: list[dict[str, Any]] = [header()]
    records += [step(n, html=f"<html><body>{page}</body></html>") for n, page in enumerate(MXSS)]
    return write(path, [*records, end()])


def worst_memory(path: Path, strings: int | None = None, dicts: int = 7_800_000) -> Path:
    """Everything just under the default budgets at once: distinct 1 MiB strings up to the expanded
    budget, then ~7.8 million empty objects (JSON values) in records under the record size."""
    if strings is None:
        strings = SessionLimits().max_expanded_bytes // MiB - 4
    records: list[dict[str, Any] | bytes] = [header()]
    records += [blob(f"s{n}", f"{n:08d}" + "x" * (MiB - 8)) for n in range(strings)]
    per_record = 2_000_000
    for n in range(0, dicts, per_record):
        items = min(per_record, dicts - n)
        records.append(b'{"type":"blob","id":"o%d","data":[' % n + b"{}," * (items - 1) + b"{}]}")
    return write(path, [*records, step(0, html="<p>x</p>"), end()], level=1)
