"""A hostile-input generator: for every input format, families of crafted inputs, and the commands to run on them.

Formats: session files (format 1-3), HAR, Playwright trace zips, AgentLab study folders (pickles),
browser-use histories, Verified run folders, dataset folders (``export-dataset``'s, taken back by
``import dataset``), and the run folders ``eval`` reads and writes (``output.jsonl``, ``eval_output``). Families: ``amplification`` (a few bytes that expand),
``depth``, ``types`` (type confusion), ``encoding`` (invalid UTF-8, lone surrogates), ``links``
(symlinks and paths), ``sizes`` (counts just past a limit), ``names`` (names that clean to one file).

A case is built in a fresh directory by ``Case.build(place)``; ``place.outside`` is a folder the
run must neither read into a session (it holds ``SECRET``) nor write to. ``cases(seed, full)`` yields
every (case, command) pair; ``tests/unit/test_hostile_generator.py`` runs them under the budgets.
Each builder is parameterized (sizes, depths, positions drawn from the seed), so a run with another
seed makes other inputs of the same family.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import random
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from cdp_integration.session.limits import SessionLimits
from tests import hostile_corpus as corpus

SECRET = "SECRET-4f1c-outside-file"
"""Text of the files outside the input's place: must never appear in anything a run writes."""
LIMITS = SessionLimits()


@dataclass
class Place:
    """Where a case is built: ``root`` (the run's working directory), ``outside`` (off limits)."""

    root: Path
    outside: Path
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables the case's commands run with (the ``environment`` family sets them)."""

    def secret_file(self, name: str = "secret.txt", data: bytes | None = None) -> Path:
        path = self.outside / name
        path.write_bytes(data if data is not None else SECRET.encode())
        return path


@dataclass(frozen=True)
class Case:
    name: str
    fmt: str
    family: str
    build: Callable[[Place, random.Random], list[list[str]]]
    """Builds the input in ``place.root`` and returns the command lines (``cdp-session`` args) to run."""
    may_succeed: bool = False
    """Exit 0 is acceptable (a correct import or a command that tolerates the input)."""
    expect: tuple[str, ...] = field(default_factory=tuple)
    """Text the one-line error must hold, when the run fails."""
    surfaces: tuple[str, ...] = ()
    """The input surfaces (``tests/surfaces.py``'s names) this case attacks: every surface the code
    declares must be named by some case."""
    program: str = "cdp-session"
    """``cdp-session``, or ``run_infer.py`` (evaluation/benchmarks/webarena/)."""


# -- shared pieces ----------------------------------------------------------------------------------


def _trace(
    path: Path, events: list[Any], extra: dict[str, bytes] | None = None, network: bytes = b""
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "trace.trace",
            b"\n".join(e if isinstance(e, bytes) else json.dumps(e).encode() for e in events) + b"\n",
        )
        archive.writestr("trace.network", network)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


TRACE_HEAD: list[Any] = [
    {
        "type": "context-options",
        "version": 10,
        "wallTime": 1000,
        "monotonicTime": 0,
        "playwrightVersion": "1.65.1",
    },
    {"type": "event", "class": "BrowserContext", "method": "page", "params": {"pageId": "page@1"}},
    {
        "type": "before",
        "callId": "c1",
        "class": "Frame",
        "method": "goto",
        "params": {"url": "http://shop.test/"},
    },
]


def snapshot(html: Any, call: str = "c1") -> dict[str, Any]:
    return {
        "type": "frame-snapshot",
        "snapshot": {
            "callId": call, "phase": "after", "pageId": "page@1", "frameId": "frame@1",
            "frameUrl": "http://shop.test/", "isMainFrame": True, "html": html, "timestamp": 1.0,
            "wallTime": 1.0, "resourceOverrides": [],
        },
    }  # fmt: skip


def _history(items: Any) -> bytes:
    return orjson.dumps({"history": items})


def _history_item(n: int, url: str = "http://shop.test/") -> dict[str, Any]:
    return {
        "model_output": {"action": [{"click": {"index": n}}]},
        "state": {"url": url, "title": "Shop", "tabs": [{"url": url, "title": "Shop", "page_id": 0}]},
        "result": [{"extracted_content": f"r{n}"}],
        "metadata": {"step_start_time": float(n)},
    }


def _har(entries: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(
        {"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": entries}}
    )


def _har_entry(
    n: int, *, url: str = "http://shop.test/", headers: list[dict[str, str]] | None = None, doc: bool = True
) -> dict[str, Any]:
    return {
        "startedDateTime": "2024-01-01T00:00:00Z",
        "request": {
            "method": "GET", "url": f"{url}?n={n}", "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Accept", "value": "text/html"}, {"name": "Sec-Fetch-Dest", "value": "document" if doc else "empty"}, {"name": "Sec-Fetch-Mode", "value": "navigate" if doc else "cors"}],
            "queryString": [], "cookies": [],
        },
        "response": {
            "status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": headers or [],
            "cookies": [], "content": {"size": 2, "mimeType": "text/html", "text": "ok"}, "redirectURL": "",
        },
        "timings": {"send": 0, "wait": 0, "receive": 0}, "time": 0, "cache": {},
    }  # fmt: skip


def _verified(place: Place, response: bytes, har: bytes, task: str = "7") -> Path:
    run = place.root / "run"
    (run / task).mkdir(parents=True, exist_ok=True)
    (run / task / "agent_response.json").write_bytes(response)
    (run / task / "network.har").write_bytes(har)
    return run


_RESPONSE = orjson.dumps({"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["x"]})


def _agentlab(place: Place, pickles: dict[str, bytes], summary: bytes | None = None) -> Path:
    folder = place.root / "study" / "2024-01-01_agent_on_webarena.7_0"
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in pickles.items():
        (folder / name).write_bytes(gzip.compress(data, 1))
    if summary is not None:
        (folder / "summary_info.json").write_bytes(summary)
    return place.root / "study"


def _step_info(obs: Any) -> bytes:
    """A pickle of AgentLab's StepInfo holding ``obs``, written opcode by opcode (the class by name)."""
    state = pickle.dumps({"step": 0, "obs": obs, "reward": 0.0, "action": "click('1')"}, protocol=2)
    return b"\x80\x02cagentlab.experiments.loop\nStepInfo\n)\x81" + state[2:-1] + b"b."


def _dom(
    strings: list[str], names: list[int], parents: list[int], types: list[int], values: list[int]
) -> dict[str, Any]:
    return {
        "strings": strings,
        "documents": [{"nodes": {"parentIndex": parents, "nodeType": types, "nodeName": names, "nodeValue": values, "attributes": [[] for _ in parents]}}],
    }  # fmt: skip


def _obs(dom: Any = None, **extra: Any) -> dict[str, Any]:
    obs = {
        "url": "http://shop.test/",
        "open_pages_urls": ["http://shop.test/"],
        "open_pages_titles": ["Shop"],
        "active_page_index": 0,
        "chat_messages": [{"role": "assistant", "message": "hi"}],
    }
    if dom is not None:
        obs["dom_object"] = dom
    obs.update(extra)
    return obs


def _session(path: Path, records: list[Any], version: int = 3) -> Path:
    head = corpus.header()
    head["format_version"] = version
    return corpus.write(path, [head, *records])


def _out(place: Place) -> str:
    return str(place.root / "out")


def _session_commands(path: Path, place: Place) -> list[list[str]]:
    s = str(path)
    return [
        ["show", s, "0", "--json"], ["info", s], ["view", s, "-o", str(place.root / "v.html")],
        ["har", s, "-o", str(place.root / "h.har")], ["redact", s, "-o", str(place.root / "r.session.jsonl.gz")],
        ["eval", str(path.parent), "-o", _out(place), "--no-progress"],
    ]  # fmt: skip


# -- session files ----------------------------------------------------------------------------------


def session_cases() -> Iterator[Case]:
    def amplified(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        kind = rng.choice(["text_of_text", "one_chunk", "dom_chunks"])
        path = d / "a.session.jsonl.gz"
        if kind == "text_of_text":
            corpus.text_of_text(path, levels=rng.randint(30, 40))
        elif kind == "one_chunk":
            corpus.one_chunk_many_times(path, scale=0.35)
        else:
            corpus.dom_chunks_many_times(path, scale=0.35)
        return _session_commands(path, place)

    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        depth = rng.choice([129, 253, 255, 300, 1000])
        value = b"[" * depth + b"]" * depth
        line = orjson.dumps(corpus.step(0, html="<p>x</p>"))[:-1] + b',"extra":' + value + b"}"
        path = _session(d / "a.session.jsonl.gz", [line, corpus.end()], version=rng.choice([1, 2, 3]))
        return _session_commands(path, place)

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        field_name, value = rng.choice(
            [
                ("tabs", 5),
                ("cookies", "x"),
                ("network", {"a": 1}),
                ("url", ["x"]),
                ("index", "0"),
                ("timestamp", "now"),
            ]
        )
        record = corpus.step(0, html="<p>x</p>")
        record[field_name] = value
        path = _session(d / "a.session.jsonl.gz", [record, corpus.end()])
        return _session_commands(path, place)

    def encoded(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        bad = rng.choice([b'"\\ud800"', b'"\\udfff x"', b'"\xff\xfe"', b'"\xed\xa0\x80"'])
        line = orjson.dumps(corpus.step(0, html="<p>x</p>"))[:-1] + b',"title":' + bad + b"}"
        path = _session(d / "a.session.jsonl.gz", [line, corpus.end()])
        return _session_commands(path, place)

    def linked(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        secret = _session(
            place.outside / "secret.session.jsonl.gz",
            [corpus.step(0, html=f"<p>{SECRET}</p>"), corpus.end(final_answer=SECRET)],
        )
        (d / "a.session.jsonl.gz").symlink_to(secret)
        return [["eval", str(d), "-o", _out(place), "--no-progress"]]

    def many_steps(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        count = LIMITS.max_steps + 1
        steps = (
            b'{"type":"step","index":%d,"trigger":"action","timestamp":0,"url":"u","title":"","tabs":[]}' % n
            for n in range(count)
        )
        path = corpus.write(d / "a.session.jsonl.gz", [corpus.header(), *steps, corpus.end()], level=1)
        return [["info", str(path)], ["show", str(path), "0", "--json"]]

    def many_cookies(place: Place, rng: random.Random) -> list[list[str]]:
        d = place.root / "s"
        d.mkdir()
        cookies = [
            {"name": f"c{n}", "value": "v", "domain": "shop.test"}
            for n in range(LIMITS.max_cookies_per_step + 1)
        ]
        path = _session(
            d / "a.session.jsonl.gz", [corpus.step(0, html="<p>x</p>", cookies=cookies), corpus.end()]
        )
        return [["info", str(path)], ["redact", str(path), "-o", str(place.root / "r.session.jsonl.gz")]]

    def big_blobs(place: Place, rng: random.Random) -> list[list[str]]:
        """Blobs of 255 MiB each, ~1 MB zipped: a read of it inflates past 1 GiB in one go."""
        d = place.root / "s"
        d.mkdir()
        deflate = zlib.compressobj(rng.choice([6, 9]), zlib.DEFLATED, 31)
        header = orjson.dumps(corpus.header()) + b"\n"
        parts, piece = [deflate.compress(header)], b"a" * (1 << 20)
        for n in range(rng.choice([5, 7])):
            parts.append(deflate.compress(b'{"type":"blob","id":"b%d","data":"' % n))
            parts += [deflate.compress(piece) for _ in range(255)]
            parts.append(deflate.compress(b'"}\n'))
        (d / "a.session.jsonl.gz").write_bytes(b"".join([*parts, deflate.flush()]))
        return _session_commands(d / "a.session.jsonl.gz", place)

    yield Case("session-big-blobs", "session", "amplification", big_blobs)
    yield Case("session-amplified", "session", "amplification", amplified)
    yield Case("session-deep", "session", "depth", deep)
    yield Case("session-types", "session", "types", confused)
    yield Case("session-encoding", "session", "encoding", encoded)
    yield Case("session-symlink-in-eval", "session", "links", linked, may_succeed=True)
    yield Case("session-steps", "session", "sizes", many_steps, expect=("CDP_SESSION_MAX_STEPS",))
    yield Case(
        "session-cookies", "session", "sizes", many_cookies, expect=("CDP_SESSION_MAX_COOKIES_PER_STEP",)
    )


# -- eval's run folders -----------------------------------------------------------------------------


def run_folder_cases() -> Iterator[Case]:
    def golden(place: Place) -> Path:
        d = place.root / "s"
        d.mkdir()
        _session(d / "a.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])
        return d

    def eval_output_link(place: Place, rng: random.Random) -> list[list[str]]:
        d = golden(place)
        (d / "eval_output").symlink_to(place.outside, target_is_directory=True)
        return [["eval", str(d), "--no-progress"]]

    def output_jsonl_link(place: Place, rng: random.Random) -> list[list[str]]:
        d = golden(place)
        (place.root / "out").mkdir()
        target = place.secret_file(rng.choice(["output.jsonl", "victim.txt"]))
        (place.root / "out" / "output.jsonl").symlink_to(target)
        return [["eval", str(d), "-o", _out(place), "--no-progress"]]

    def partial_link(place: Place, rng: random.Random) -> list[list[str]]:
        history = place.root / "h"
        history.mkdir()
        (history / "7.json").write_bytes(_history([_history_item(0)]))
        out = place.root / "out"
        out.mkdir()
        (out / "7.session.jsonl.gz.partial").symlink_to(place.secret_file("victim"))
        return [["import", "browser-use", str(history), "-o", str(out)]]

    def long_line(place: Place, rng: random.Random) -> list[list[str]]:
        d = golden(place)
        out = place.root / "out"
        out.mkdir()
        (out / "output.jsonl").write_bytes(b"{" + b" " * (LIMITS.max_record_bytes + 10))
        return [["eval", str(d), "-o", str(out), "--no-progress"]]

    def run_line(task_id: Any = 7, score: Any = 1.0, session_path: str = "a.session.jsonl.gz") -> bytes:
        return orjson.dumps({
            "instance_id": "a", "instance": {"task_id": task_id, "sites": ["shopping"]},
            "test_result": {"score": score, "max_score": score}, "metadata": {"session_path": session_path},
        }) + b"\n"  # fmt: skip

    def compared(place: Place, rng: random.Random) -> list[list[str]]:
        """A run beside one that is no run: a score that overflows sums, a task id int() refuses, text."""
        for name, data in (
            ("a", run_line() * 2),
            ("b", rng.choice([
                run_line(score=1e308) * rng.choice([2, 1100]), run_line(task_id=rng.choice(["²", "¹", "9" * 5000])),
                b"hello world\n", run_line()[: rng.randrange(5, 40)],
            ])),
        ):  # fmt: skip
            (place.root / name).mkdir()
            (place.root / name / "output.jsonl").write_bytes(data)
        return [["compare", str(place.root / "a"), str(place.root / "b"), "-o", _out(place)]]

    def resumed_nul(place: Place, rng: random.Random) -> list[list[str]]:
        d = golden(place)
        out = place.root / "out"
        out.mkdir()
        (out / "output.jsonl").write_bytes(run_line(session_path=rng.choice(["a\x00b", "\x00", "x/\x00/.."])))
        return [["eval", str(d), "-o", str(out), "--no-progress", "--viewers"]]

    def config_name(place: Place, rng: random.Random) -> list[list[str]]:
        d = golden(place)
        configs = place.root / "configs"
        configs.mkdir()
        name = rng.choice(["¹", "²", "٣", "9" * 5000])[:200]
        (configs / f"{name}.json").write_bytes(orjson.dumps({"task_id": 1, "eval": {"eval_types": []}}))
        return [["eval", str(d), "--configs", str(configs), "-o", _out(place), "--no-progress"]]

    yield Case("compare-no-run", "run-folder", "types", compared)
    yield Case("eval-resumed-nul-session-path", "run-folder", "encoding", resumed_nul)
    yield Case("eval-configs-unicode-digits", "run-folder", "names", config_name)
    yield Case("eval-output-dir-symlink", "run-folder", "links", eval_output_link)
    yield Case("eval-output-jsonl-symlink", "run-folder", "links", output_jsonl_link)
    yield Case("import-partial-symlink", "run-folder", "links", partial_link)
    yield Case("eval-output-jsonl-long-line", "run-folder", "sizes", long_line)


# -- HAR --------------------------------------------------------------------------------------------


def har_cases() -> Iterator[Case]:
    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        depth = rng.choice([200, 300, 1100])
        (place.root / "a.har").write_bytes(
            b'{"log":{"version":"1.2","entries":[],"x":' + b"[" * depth + b"]" * depth + b"}}"
        )
        return [["har-show", str(place.root / "a.har")]]

    def values(place: Place, rng: random.Random) -> list[list[str]]:
        count = LIMITS.max_values + rng.randint(1, 1000)
        (place.root / "a.har").write_bytes(
            b'{"log":{"version":"1.2","entries":[],"x":[' + b"{}," * (count - 1) + b"{}]}}"
        )
        return [["har-show", str(place.root / "a.har")]]

    def bomb(place: Place, rng: random.Random) -> list[list[str]]:
        member = gzip.compress(b"A" * (16 * 1024**2), 9)  # gzip members concatenated read as one stream
        head = gzip.compress(b'{"log":{"version":"1.2","entries":[],"x":"')
        (place.root / "a.har").write_bytes(head + member * rng.choice([17, 40]))
        return [["har-show", str(place.root / "a.har")]]

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        entry = _har_entry(0)
        where, value = rng.choice(
            [("request", 5), ("response", "x"), ("startedDateTime", 7), ("headers", {"a": 1})]
        )
        if where == "headers":
            entry["request"]["headers"] = value
        else:
            entry[where] = value
        (place.root / "a.har").write_bytes(_har([entry]))
        return [["har-show", str(place.root / "a.har")]]

    yield Case("har-depth", "har", "depth", deep)
    yield Case("har-values", "har", "sizes", values, expect=("CDP_SESSION_MAX_VALUES",))
    yield Case("har-bomb", "har", "amplification", bomb)
    yield Case("har-types", "har", "types", confused)


# -- Playwright traces ------------------------------------------------------------------------------


def trace_cases() -> Iterator[Case]:
    def text_readded(place: Place, rng: random.Random) -> list[list[str]]:
        """One long text, then snapshots whose body references it thousands of times (1 KB zipped)."""
        text = "x" * rng.choice([1 << 20, 4 << 20])
        events = [*TRACE_HEAD, snapshot(["HTML", {}, ["BODY", {}, text]])]
        events.append(snapshot(["HTML", {}, ["BODY", {}, *([[1, 0]] * rng.choice([2000, 5000]))]]))
        return [["import", "playwright-trace", str(_trace(place.root / "1.zip", events)), "-o", _out(place)]]

    def many_members(place: Place, rng: random.Random) -> list[list[str]]:
        members = rng.choice([130, 200])
        small = json.dumps(snapshot(["HTML", {}, ["BODY", {}, *([[]] * 100_000)]])).encode()  # 300 KB each
        extra = {f"t{n}.trace": small for n in range(members)}
        return [
            [
                "import",
                "playwright-trace",
                str(_trace(place.root / "1.zip", TRACE_HEAD, extra)),
                "-o",
                _out(place),
            ]
        ]

    def newlines(place: Place, rng: random.Random) -> list[list[str]]:
        path = place.root / "1.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            archive.writestr(
                "trace.trace",
                b"\n".join(json.dumps(e).encode() for e in TRACE_HEAD)
                + b"\n" * rng.choice([100 << 20, 200 << 20]),
            )
        return [["import", "playwright-trace", str(path), "-o", _out(place)]]

    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        depth = rng.choice([255, 900, 1100])
        node: Any = "x"
        for _ in range(depth):
            node = ["DIV", {}, node]
        events = [*TRACE_HEAD, snapshot(["HTML", {}, ["BODY", {}, node]])]
        return [["import", "playwright-trace", str(_trace(place.root / "1.zip", events)), "-o", _out(place)]]

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        bad = rng.choice([
            {"type": "before", "callId": 5, "class": [], "method": {}, "params": "x"},
            {"type": "frame-snapshot", "snapshot": {"callId": "c1", "frameId": 5, "pageId": [], "html": 7}},
            {"type": "event", "class": "BrowserContext", "method": "page", "params": 5},
            {"type": "context-options", "wallTime": "x", "monotonicTime": [], "playwrightVersion": 3},
        ])  # fmt: skip
        events = [*TRACE_HEAD, bad, snapshot(["HTML", {}, ["BODY", {}, "x"]])]
        return [["import", "playwright-trace", str(_trace(place.root / "1.zip", events)), "-o", _out(place)]]

    def linked(place: Place, rng: random.Random) -> list[list[str]]:
        events = [*TRACE_HEAD, snapshot(["HTML", {}, ["BODY", {}, SECRET]])]
        secret = _trace(place.outside / "1.zip", events)
        traces = place.root / "traces"
        traces.mkdir()
        (traces / "1.zip").symlink_to(secret)
        return [["import", "playwright-trace", str(traces), "-o", _out(place)]]

    def page_per_action(place: Place, rng: random.Random) -> list[list[str]]:
        """A few KB: every action opens a page that stays open (pages x actions tab states)."""
        events: list[Any] = [TRACE_HEAD[0]]
        for n in range(rng.choice([600, 1200])):
            page = f"page@{n}"
            events.append(
                {"type": "event", "class": "BrowserContext", "method": "page", "params": {"pageId": page}}
            )
            events.append({
                "type": "before", "callId": f"a{n}", "class": "Frame", "method": "click", "startTime": float(n),
                "pageId": page, "params": {"selector": "p"},
            })  # fmt: skip
            events.append({"type": "after", "callId": f"a{n}", "endTime": n + 0.5})
        return [["import", "playwright-trace", str(_trace(place.root / "1.zip", events)), "-o", _out(place)]]

    yield Case(
        "trace-page-per-action", "trace", "amplification", page_per_action, expect=("CDP_SESSION_MAX_STEPS",)
    )
    yield Case("trace-text-readded", "trace", "amplification", text_readded)
    yield Case("trace-many-members", "trace", "amplification", many_members)
    yield Case("trace-newlines", "trace", "amplification", newlines)
    yield Case("trace-depth", "trace", "depth", deep, may_succeed=True)
    yield Case("trace-types", "trace", "types", confused, may_succeed=True)
    yield Case("trace-symlink", "trace", "links", linked)


# -- AgentLab ---------------------------------------------------------------------------------------


def _memo_index(index: int) -> bytes:
    return b"\x80\x04]r" + index.to_bytes(4, "little") + b"."


def agentlab_cases() -> Iterator[Case]:
    def command(study: Path, place: Place) -> list[list[str]]:
        return [["import", "agentlab", str(study), "-o", _out(place)]]

    def shared_refs(place: Place, rng: random.Random) -> list[list[str]]:
        """Each level a list holding the previous level twice (memo references): 2**levels uses."""
        levels = rng.randint(40, 60)
        data = bytearray(b"\x80\x04")
        data += b"]\x94" + b"X\x01\x00\x00\x00x" + b"a"  # list 0 ['x'] memo 0
        for level in range(1, levels + 1):
            data += b"]\x94(" + b"h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"e"
        obs_pickle = bytes(data) + b"."
        return command(_agentlab(place, {"step_0.pkl.gz": obs_pickle}), place)

    def memo(place: Place, rng: random.Random) -> list[list[str]]:
        return command(
            _agentlab(place, {"step_0.pkl.gz": _memo_index(rng.choice([90_000_000, 500_000_000]))}), place
        )

    def big_bytearray(place: Place, rng: random.Random) -> list[list[str]]:
        size = rng.choice([1_400_000_000, 900_000_000])
        data = b"\x80\x04cbuiltins\nbytearray\nJ" + size.to_bytes(4, "little", signed=True) + b"\x85R."
        return command(_agentlab(place, {"step_0.pkl.gz": data}), place)

    def empty_dicts(place: Place, rng: random.Random) -> list[list[str]]:
        count = rng.choice([18_000_000, 12_000_000])
        data = b"\x80\x04(" + b"}" * count + b"l."
        return command(_agentlab(place, {"step_0.pkl.gz": data}), place)

    def text_readded(place: Place, rng: random.Random) -> list[list[str]]:
        nodes = rng.choice([3000, 6000])
        dom = _dom(
            ["HTML", "BODY", "#text", "z" * (1 << 20)],
            [0, 1] + [2] * nodes,
            [-1, 0] + [1] * nodes,
            [1, 1] + [3] * nodes,
            [-1, -1] + [3] * nodes,
        )
        return command(_agentlab(place, {"step_0.pkl.gz": _step_info(_obs(dom))}), place)

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        obs = rng.choice([
            _obs(open_pages_urls=5), _obs(active_page_index="x"), _obs(chat_messages={"a": 1}),
            _obs(dom=_dom(["A"], 5, [-1], [1], [-1])),  # type: ignore[arg-type]
            _obs(dom={"strings": [], "documents": [5]}),
            _obs(dom=_dom(["HTML"], [0, 0], [-1, 10**12], [1, 3], [0, 10**12])), _obs(url=7),
        ])  # fmt: skip
        return command(_agentlab(place, {"step_0.pkl.gz": _step_info(obs)}), place)

    def surrogate(place: Place, rng: random.Random) -> list[list[str]]:
        obs = _obs(chat_messages=[{"role": "assistant", "message": "answer \ud800 here"}])
        obs["url"] = rng.choice(["http://shop.test/\udfff", "http://shop.test/"])
        return command(_agentlab(place, {"step_0.pkl.gz": _step_info(obs)}), place)

    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        depth = rng.choice([240, 300, 900])
        value: Any = "x"
        for _ in range(depth):
            value = [value]
        return command(_agentlab(place, {"step_0.pkl.gz": _step_info(_obs(extra=value))}), place)

    def linked(place: Place, rng: random.Random) -> list[list[str]]:
        study = _agentlab(place, {})
        folder = next(study.iterdir())
        secret = place.outside / "step_0.pkl.gz"
        secret.write_bytes(
            gzip.compress(_step_info(_obs(chat_messages=[{"role": "assistant", "message": SECRET}])))
        )
        (folder / "step_0.pkl.gz").symlink_to(secret)
        return command(study, place)

    yield Case("agentlab-shared-references", "agentlab", "amplification", shared_refs)
    yield Case("agentlab-memo-index", "agentlab", "amplification", memo, expect=("memo",))
    yield Case("agentlab-bytearray", "agentlab", "amplification", big_bytearray)
    yield Case("agentlab-empty-dicts", "agentlab", "amplification", empty_dicts)
    yield Case("agentlab-dom-text-readded", "agentlab", "amplification", text_readded)
    yield Case("agentlab-types", "agentlab", "types", confused, may_succeed=True)
    yield Case("agentlab-surrogates", "agentlab", "encoding", surrogate, may_succeed=True)
    yield Case("agentlab-depth", "agentlab", "depth", deep, may_succeed=True)
    yield Case("agentlab-symlink", "agentlab", "links", linked)


# -- browser-use ------------------------------------------------------------------------------------


def browser_use_cases() -> Iterator[Case]:
    def command(path: Path, place: Place) -> list[list[str]]:
        return [["import", "browser-use", str(path), "-o", _out(place)]]

    def values(place: Place, rng: random.Random) -> list[list[str]]:
        count = rng.choice([LIMITS.max_values + 1, 30_000_000])
        path = place.root / "7.json"
        path.write_bytes(b'{"history":[' + b"{}," * (count - 1) + b"{}]}")
        return command(path, place)

    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        depth = rng.choice([253, 254, 260, 600])
        path = place.root / "7.json"
        item = _history_item(0)
        raw = orjson.dumps(item)[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
        path.write_bytes(b'{"history":[' + raw + b"]}")
        return command(path, place)

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        item: Any = _history_item(0)
        choice = rng.randrange(6)
        if choice == 0:
            item["state"]["tabs"] = [5, "x"]
        elif choice == 1:
            item["metadata"]["step_start_time"] = "soon"
        elif choice == 2:
            item["model_output"]["action"] = [5, {"done": 1}]
        elif choice == 3:
            item["result"] = [5]
        elif choice == 4:
            item["state"]["url"] = {"x": 1}
        else:
            item = 5
        path = place.root / "7.json"
        path.write_bytes(_history([item, _history_item(1)]))
        return command(path, place)

    def too_many(place: Place, rng: random.Random) -> list[list[str]]:
        path = place.root / "7.json"
        path.write_bytes(_history([_history_item(0)] * rng.choice([LIMITS.max_steps + 1, 40_000])))
        return command(path, place)

    def linked_har(place: Place, rng: random.Random) -> list[list[str]]:
        secret = place.secret_file("x.har", _har([_har_entry(0, url=f"https://shop.test/{SECRET}")]))
        folder = place.root / "h"
        folder.mkdir()
        (folder / "7.json").write_bytes(_history([_history_item(0, "https://shop.test/")]))
        (folder / "7.har").symlink_to(secret)
        return command(folder if rng.random() < 0.5 else folder / "7.json", place)

    def names(place: Place, rng: random.Random) -> list[list[str]]:
        folder = place.root / "h"
        folder.mkdir()
        for name in rng.choice([("a b", "a_b"), ("x!", "x?"), ("Q", "q")]):
            (folder / f"{name}.json").write_bytes(
                _history([{**_history_item(0), "result": [{"extracted_content": name}]}])
            )
        return command(folder, place)

    def undecodable_name(place: Place, rng: random.Random) -> list[list[str]]:
        folder = place.root / "h"
        folder.mkdir()
        name = os.fsdecode(b"7\xff\xfe.json")
        (folder / name).write_bytes(_history([_history_item(0)]))
        return command(folder, place)

    yield Case("browser-use-values", "browser-use", "sizes", values, expect=("CDP_SESSION_MAX_VALUES",))
    yield Case("browser-use-depth", "browser-use", "depth", deep)
    yield Case("browser-use-types", "browser-use", "types", confused, may_succeed=True)
    yield Case("browser-use-steps", "browser-use", "sizes", too_many, expect=("CDP_SESSION_MAX_STEPS",))
    yield Case("browser-use-har-symlink", "browser-use", "links", linked_har)
    yield Case("browser-use-names-clash", "browser-use", "names", names, may_succeed=True)
    yield Case("browser-use-undecodable-name", "browser-use", "encoding", undecodable_name, may_succeed=True)


# -- Verified ---------------------------------------------------------------------------------------


def verified_cases() -> Iterator[Case]:
    def command(run: Path, place: Place) -> list[list[str]]:
        return [["import", "verified", str(run), "-o", _out(place)]]

    def linked(place: Place, rng: random.Random) -> list[list[str]]:
        run = _verified(place, _RESPONSE, _har([_har_entry(0)]))
        which = rng.choice(["agent_response.json", "network.har"])
        secret = place.secret_file(
            which,
            _RESPONSE.replace(b'"x"', f'"{SECRET}"'.encode())
            if which.endswith("json")
            else _har([_har_entry(0, url=f"http://shop.test/{SECRET}")]),
        )
        (run / "7" / which).unlink()
        (run / "7" / which).symlink_to(secret)
        return command(run, place)

    def cookie_jar(place: Place, rng: random.Random) -> list[list[str]]:
        cookies = [{"name": "Set-Cookie", "value": f"c{n}=v"} for n in range(rng.choice([2000, 3500]))]
        entries = [_har_entry(0, headers=cookies)] + [
            _har_entry(n) for n in range(1, rng.choice([3000, 6000]))
        ]
        return command(_verified(place, _RESPONSE, _har(entries)), place)

    def one_step(place: Place, rng: random.Random) -> list[list[str]]:
        """Many entries and no navigation among them: one step (a scan per entry was quadratic)."""
        entries = [_har_entry(0)] + [_har_entry(n, doc=False) for n in range(1, rng.choice([20_000, 60_000]))]
        return command(_verified(place, _RESPONSE, _har(entries)), place)

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        response = rng.choice([b"[1,2]", b'"x"', b"5", b'{"task_type": 5}'])
        return command(_verified(place, response, _har([_har_entry(0)])), place)

    yield Case("verified-symlink", "verified", "links", linked)
    yield Case("verified-cookie-jar", "verified", "amplification", cookie_jar, may_succeed=True)
    yield Case("verified-one-big-step", "verified", "sizes", one_step, may_succeed=True)
    yield Case("verified-types", "verified", "types", confused, may_succeed=True)


# -- dataset folders (import dataset) ---------------------------------------------------------------


def dataset_cases() -> Iterator[Case]:
    def dataset(place: Place) -> Path:
        root = place.root / "ds"
        (root / "data").mkdir(parents=True)
        (root / "README.md").write_text("---\nlicense: other\n---\n")
        return root

    def command(root: Path, place: Place) -> list[list[str]]:
        return [["import", "dataset", str(root), "-o", _out(place)]]

    def sessions_link(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        _session(
            place.outside / "secret.session.jsonl.gz",
            [corpus.step(0, html=f"<p>{SECRET}</p>"), corpus.end(final_answer=SECRET)],
        )
        if rng.random() < 0.5:
            (root / "sessions").symlink_to(place.outside, target_is_directory=True)
        else:  # deeper: a folder inside sessions/ that leads outside
            (root / "sessions" / "run").mkdir(parents=True)
            (root / "sessions" / "run" / "agent").symlink_to(place.outside, target_is_directory=True)
        return command(root, place)

    def session_link(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        folder = root / "sessions" / rng.choice(["", "a", "a/b"])
        folder.mkdir(parents=True, exist_ok=True)
        _session(folder / "ok.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])
        secret = _session(
            place.outside / "secret.session.jsonl.gz",
            [corpus.step(0, html=f"<p>{SECRET}</p>"), corpus.end(final_answer=SECRET)],
        )
        (folder / "z.session.jsonl.gz").symlink_to(secret)
        return command(root, place)

    def output_link(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        (root / "sessions").mkdir()
        _session(root / "sessions" / "a.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])
        if rng.random() < 0.5:
            Path(_out(place)).symlink_to(place.outside, target_is_directory=True)
        else:  # the session's own target is a link to a file outside
            Path(_out(place)).mkdir()
            Path(_out(place), "a.session.jsonl.gz").symlink_to(place.secret_file("victim"))
        return command(root, place)

    def amplified(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        folder = root / "sessions" / "run"
        folder.mkdir(parents=True)
        path = folder / "a.session.jsonl.gz"
        if rng.random() < 0.5:
            corpus.text_of_text(path, levels=rng.randint(30, 40))
        else:
            corpus.one_chunk_many_times(path, scale=0.35)
        return command(root, place)

    def deep(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        depth = rng.choice([129, 300, 1000])
        if rng.random() < 0.5:  # deep JSON in a session
            (root / "sessions").mkdir()
            value = b"[" * depth + b"]" * depth
            line = orjson.dumps(corpus.step(0, html="<p>x</p>"))[:-1] + b',"extra":' + value + b"}"
            _session(root / "sessions" / "a.session.jsonl.gz", [line, corpus.end()])
        else:  # deeply nested folders
            folder = root / "sessions"
            for _ in range(min(depth, 150)):
                folder = folder / "d"
            folder.mkdir(parents=True)
            _session(folder / "a.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])
        return command(root, place)

    def confused(place: Place, rng: random.Random) -> list[list[str]]:
        root = dataset(place)
        (root / "sessions").mkdir()
        kind = rng.choice(["directory", "fifo", "not_gzip", "types"])
        path = root / "sessions" / "a.session.jsonl.gz"
        if kind == "directory":  # a folder named like a session
            path.mkdir()
            _session(path / "b.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])
        elif kind == "fifo":  # reading it would block forever
            os.mkfifo(path)
        elif kind == "not_gzip":
            path.write_bytes(b"PK\x03\x04" + bytes(rng.randrange(256) for _ in range(200)))
        else:
            record = corpus.step(0, html="<p>x</p>")
            record["tabs"] = "x"
            _session(path, [record, corpus.end()])
        return command(root, place)

    yield Case("dataset-sessions-symlink", "dataset", "links", sessions_link)
    yield Case("dataset-session-symlink", "dataset", "links", session_link)
    yield Case("dataset-output-symlink", "dataset", "links", output_link)
    yield Case("dataset-amplified", "dataset", "amplification", amplified)
    yield Case("dataset-deep", "dataset", "depth", deep, may_succeed=True)
    yield Case("dataset-types", "dataset", "types", confused, may_succeed=True)


# -- the other input surfaces: arguments, outputs, configs, URLs, environment, run_infer.py --------


def _cli(command: str, *params: str) -> tuple[str, ...]:
    return tuple(f"cdp-session {command} {param}" for param in params)


_SESSION_ARGUMENT = tuple(
    f"cdp-session {c} session_path"
    for c in (
        "info",
        "show",
        "steps",
        "diff",
        "view",
        "har",
        "redact",
        "export-wabe",
        "eval-at",
        "rescore",
        "debug",
    )
)


def _golden_session(place: Place) -> Path:
    d = place.root / "s"
    d.mkdir(exist_ok=True)
    return _session(d / "a.session.jsonl.gz", [corpus.step(0, html="<p>x</p>"), corpus.end()])


def argument_cases() -> Iterator[Case]:
    def not_a_session(place: Place, rng: random.Random) -> list[list[str]]:
        """SESSION a FIFO (reading would block), a folder, or a gzip stream cut short."""
        path = place.root / "a.session.jsonl.gz"
        kind = rng.choice(["fifo", "directory", "truncated"])
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            whole = _session(place.root / "whole.session.jsonl.gz", [corpus.step(0, html="<p>x</p>")])
            path.write_bytes(whole.read_bytes()[:25])
        p, out = str(path), str(place.root / "o")
        return [
            ["info", p], ["show", p, "0"], ["steps", p], ["diff", p, "0", "0"], ["view", p, "-o", out],
            ["har", p, "-o", out], ["redact", p, "-o", out], ["export-wabe", p, "-o", out],
            ["eval-at", p, "0", "--js", "1"], ["rescore", p], ["debug", p], ["compare", p, p, "-o", out],
            ["export-dataset", p, "-o", out], ["export-verified", p, "-o", out],
        ]  # fmt: skip

    yield Case(
        "argument-not-a-session", "argument", "types", not_a_session, may_succeed=True,
        surfaces=(*_SESSION_ARGUMENT, *_cli("compare", "runs"), *_cli("export-dataset", "run"), *_cli("export-verified", "sessions")),
    )  # fmt: skip


_OUTPUT_FILES = (
    *_cli("har", "output"), *_cli("view", "output"), *_cli("redact", "output"), *_cli("schema", "output"),
)  # fmt: skip
_OUTPUT_DIRS = (
    *_cli("export-wabe", "output"), *_cli("export-verified", "output_dir", "submission_root"),
    *_cli("export-dataset", "output_dir"), *_cli("compare", "output_dir"), *_cli("eval", "output_location"),
)  # fmt: skip


def output_cases() -> Iterator[Case]:
    def file_link(place: Place, rng: random.Random) -> list[list[str]]:
        """The output file is a symlink planted to a file outside: refused, the file untouched."""
        session = str(_golden_session(place))
        link = place.root / "planted"
        link.symlink_to(place.secret_file("victim"))
        return [
            ["har", session, "-o", str(link)], ["view", session, "-o", str(link)],
            ["redact", session, "-o", str(link)], ["schema", "-o", str(link)],
        ]  # fmt: skip

    def inside_link(place: Place, rng: random.Random) -> list[list[str]]:
        """The output folder exists and a file the command writes in it is a symlink outside."""
        session = _golden_session(place)
        out = place.root / "out"
        out.mkdir()
        for name in ("result.json", "output.jsonl", "compare.md", "README.md", "report.json", "config.json"):
            (out / name).symlink_to(place.secret_file(f"victim-{name}"))
        (out / "7").mkdir()
        for name in ("agent_response.json", "network.har"):
            (out / "7" / name).symlink_to(place.secret_file(f"victim-{name}"))
        run = place.root / "run"
        run.mkdir()
        (run / "output.jsonl").write_text(
            json.dumps({"instance_id": "webarena.7", "test_result": {"score": 1.0}}) + "\n"
        )
        s, o = str(session), str(out)
        return [
            ["export-wabe", s, "-o", o], ["export-verified", s, "-o", o],
            ["export-verified", s, "-o", str(place.root / "v"), "--submission", o],
            ["export-dataset", str(session.parent), "-o", o], ["compare", str(run), str(run), "-o", o],
            ["eval", str(session.parent), "-o", o, "--no-progress"],
        ]  # fmt: skip

    yield Case(  # refused, or the link itself replaced (a temp file renamed over it): never written through
        "output-file-symlink", "output", "links", file_link, may_succeed=True, surfaces=_OUTPUT_FILES
    )
    yield Case(
        "output-folder-inner-symlink", "output", "links", inside_link, may_succeed=True, surfaces=_OUTPUT_DIRS
    )


_CONFIGS = (
    *_cli("eval", "configs_path", "answers_path"), *_cli("import", "configs_path", "answers_path"),
    *_cli("export-dataset", "configs_path"), *_cli("compare", "configs_paths"), *_cli("rescore", "config_path"),
)  # fmt: skip


def config_cases() -> Iterator[Case]:
    def hostile_config(place: Place, rng: random.Random) -> list[list[str]]:
        """A configs/answers file nested past the JSON depth limit, a FIFO, or a link to a secret."""
        session = _golden_session(place)
        path = place.root / "configs.json"
        kind = rng.choice(["deep", "fifo", "link", "types"])
        if kind == "deep":
            depth = rng.choice([300, 5000])
            path.write_bytes(b"[" * depth + b"]" * depth)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link":
            path.symlink_to(
                place.secret_file("configs.json", json.dumps([{"task_id": 0, "intent": SECRET}]).encode())
            )
        else:
            path.write_bytes(rng.choice([b'{"7": [1, {"a": 2}]}', b'[5, "x"]', b'"\xff"']))
        history = place.root / "h"
        history.mkdir()
        (history / "7.json").write_bytes(_history([_history_item(0)]))
        s, c, out = str(session), str(path), _out(place)
        return [
            ["eval", str(session.parent), "--configs", c, "-o", out, "--no-progress"],
            ["eval", str(history), "--import", "browser-use", "--answers", c, "-o", out, "--no-progress"],
            ["import", "browser-use", str(history), "--configs", c, "-o", out],
            ["import", "browser-use", str(history), "--answers", c, "-o", out],
            ["export-dataset", str(session.parent), "--configs", c, "-o", out],
            ["compare", str(session.parent), str(session.parent), "--configs", c, "-o", out],
            ["rescore", s, "--config", c],
        ]

    yield Case("config-hostile", "config", "types", hostile_config, may_succeed=True, surfaces=_CONFIGS)


_URLS = (
    *_cli("eval", "site_urls", "ray_address", "sessions_location"), *_cli("import", "site_urls"),
    *_cli("record", "site_urls", "endpoint", "output"), *_cli("export-verified", "site_urls"),
)  # fmt: skip
HOSTILE_URLS = (
    "http://[::1", "http://ex\u2100ample", "http://h\uff0fx", "http://admin:hunter2@127.0.0.1:1\x1b]52;c;eA==\x07",
    "http://h:99999", "http://h:\u00b2", "data://c2VjcmV0", "zip://a::s3://b/c", "reference://x", "javascript:alert(1)",
)  # fmt: skip


def url_cases() -> Iterator[Case]:
    def hostile_url(place: Place, rng: random.Random) -> list[list[str]]:
        session = _golden_session(place)
        url = rng.choice(HOSTILE_URLS)
        history = place.root / "h"
        history.mkdir()
        (history / "7.json").write_bytes(_history([_history_item(0)]))
        d, out = str(session.parent), _out(place)
        return [
            ["eval", d, "--site-url", f"shopping={url}", "-o", out, "--no-progress"],
            ["eval", d, "--backend", "ray", "--ray-address", url.removeprefix("http://"), "-o", out],
            ["eval", url, "-o", out, "--no-progress"],
            ["import", "browser-use", str(history), "--site-url", f"shopping={url}", "-o", out],
            ["export-verified", d, "--site-url", f"shopping={url}", "-o", out],
            ["record", "--cdp", url, "-o", str(place.root / "rec")],
            [
                "record",
                "--cdp",
                "http://127.0.0.1:1",
                "--site-url",
                f"map={url}",
                "-o",
                str(place.root / "rec"),
            ],
        ]

    yield Case("url-hostile", "url", "encoding", hostile_url, surfaces=_URLS)


ENVIRONMENT_ATTACKS: dict[str, tuple[str, ...]] = {
    "CDP_STORAGE_MAX_BYTES": ("0", "lots", "\u00b2", "9" * 40),
    "CDP_STORAGE_CONNECT_TIMEOUT": ("nan", "-1", "1e999"),
    "CDP_STORAGE_READ_TIMEOUT": ("soon", "0", "inf"),
    "CDP_STORAGE_RETRIES": ("-1", "1.5", "\u0663"),
    "WEBARENA_BASE_URL": ("http://[::1", "http://127.0.0.1:1", "http://h/x", "http://a:b@h\x1b[2J"),
    "WA_<SITE>": ("http://[::1", "http://ex\u2100ample", "ftp://h", "http://a:hunter2@h:x"),
    "CDP_SESSION_MAX_<LIMIT>": ("0", "-5", "lots", "1" * 40),
}
"""Variables a ``cdp-session`` command reads, each with values meant to break it."""


def environment_cases() -> Iterator[Case]:
    def hostile_env(place: Place, rng: random.Random) -> list[list[str]]:
        from cdp_integration.session.limits import ENV_VARS

        session = _golden_session(place)
        variable = rng.choice(sorted(ENVIRONMENT_ATTACKS))
        value = rng.choice(ENVIRONMENT_ATTACKS[variable])
        if variable == "WA_<SITE>":
            variable = f"WA_{rng.choice(['SHOPPING', 'SHOPPING_ADMIN', 'REDDIT', 'GITLAB', 'WIKIPEDIA', 'MAP', 'HOMEPAGE'])}"
        elif variable == "CDP_SESSION_MAX_<LIMIT>":
            variable = rng.choice(sorted(ENV_VARS.values()))
        place.env[variable] = value
        if variable.startswith("CDP_STORAGE"):
            return [["eval", "s3://runs/sessions", "-o", _out(place), "--no-progress"]]
        if variable.startswith(("WA_", "WEBARENA")):
            history = place.root / "h"
            history.mkdir()
            (history / "7.json").write_bytes(_history([_history_item(0)]))
            return [["import", "browser-use", str(history), "-o", _out(place)]]
        return [["info", str(session)]]

    from cdp_integration.session.limits import ENV_VARS

    surfaces = tuple(
        f"env {name}" for name in ENVIRONMENT_ATTACKS if not name.startswith("CDP_SESSION_MAX")
    ) + tuple(f"env {name}" for name in ENV_VARS.values())
    yield Case(
        "environment-hostile", "environment", "types", hostile_env, may_succeed=True, surfaces=surfaces
    )


_RUN_INFER = (
    "run_infer.py --pool",
    "run_infer.py --output-dir",
    "run_infer.py --trajectories",
    "run_infer.py --llm-base-url",
    "run_infer.py --ray-address",
)


def pool_cases() -> Iterator[Case]:
    def base(place: Place, *extra: str) -> list[str]:
        return [
            "--dataset", "webarena", "--output-dir", str(place.root / "o"), "--task-ids", "27",
            "--trajectories", str(Path(__file__).parent / "standins" / "tasks.json"), *extra,
        ]  # fmt: skip

    def hostile_pool(place: Place, rng: random.Random) -> list[list[str]]:
        place.env["WEBARENA_CDP_LOGGING"] = "true"
        pool = place.root / "pool.toml"
        kind = rng.choice(["deep", "url", "port", "credentials"])
        if kind == "deep":
            depth = rng.choice([40, 5000, 100_000])
            pool.write_text("x = " + "[" * depth + "]" * depth + "\n")
        else:
            url = {
                "url": rng.choice(HOSTILE_URLS[:4]),
                "port": "http://127.0.0.1:1",
                "credentials": "http://admin:hunter2@h\x1b[2J",
            }[kind]
            pool.write_text(f'[[deployment]]\nname = "a"\nbase_url = {json.dumps(url)}\n')
        trajectories = place.root / "t.json"
        depth = rng.choice([300, 5000])
        trajectories.write_bytes(b"[" * depth + b"]" * depth)
        url = rng.choice(HOSTILE_URLS)
        return [
            base(place, "--pool", str(pool)),
            [*base(place, "--pool", str(pool))[:-2], "--trajectories", str(trajectories)],
            ["--dataset", "webarena", "--output-dir", url, "--pool", str(pool)],
            [*base(place), "--llm-base-url", url],
            [
                *base(place),
                "--pool",
                str(pool),
                "--backend",
                "ray",
                "--ray-address",
                url.removeprefix("http://"),
            ],
        ]

    yield Case(
        "pool-hostile", "pool", "depth", hostile_pool, surfaces=_RUN_INFER, program="run_infer.py",
        expect=(),
    )  # fmt: skip


_FORMAT_SURFACES: dict[str, tuple[str, ...]] = {
    "session": (
        *_cli("show", "session_path"), *_cli("info", "session_path"), *_cli("view", "session_path"),
        *_cli("har", "session_path"), *_cli("redact", "session_path"), *_cli("eval", "sessions_location"),
    ),
    "run-folder": (*_cli("eval", "sessions_location", "output_location"), *_cli("import", "output_dir")),
    "har": _cli("har-show", "har_path"),
    "trace": _cli("import", "path", "output_dir"),
    "agentlab": _cli("import", "path", "output_dir"),
    "browser-use": _cli("import", "path", "output_dir"),
    "verified": _cli("import", "path", "output_dir"),
    "dataset": _cli("import", "path", "output_dir"),
}  # fmt: skip
"""What the format's cases attack: their commands' input and output arguments."""


def all_cases() -> list[Case]:
    formats = [
        *session_cases(), *run_folder_cases(), *har_cases(), *trace_cases(), *agentlab_cases(),
        *browser_use_cases(), *verified_cases(), *dataset_cases(),
    ]  # fmt: skip
    return [
        *(replace(case, surfaces=case.surfaces or _FORMAT_SURFACES[case.fmt]) for case in formats),
        *argument_cases(), *output_cases(), *config_cases(), *url_cases(), *environment_cases(), *pool_cases(),
    ]  # fmt: skip
