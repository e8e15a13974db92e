"""``cdp-session import``: real recordings of other tools, scored, equal to the live score or loud.

The recordings are made by the tools themselves on the demo corpus (``tests/integration/corpus.py``):
Playwright traces recorded by Playwright's own tracing during the live BrowserGym episodes (DOM
snapshots on, as WebArena's ``run.py`` records them; screenshots off, which the importer does not
read), WebArena-Verified run folders written by
``export-verified`` from the corpus sessions. Each imported session is scored with the official
evaluator; the score must equal the live one (the BrowserGym reward of the same episode), or the
scoring must raise ``ReplayMissError`` naming what the format lacks. A wrong score is never accepted,
and the evaluation types a format holds (url_match, string_match with ``--answers``; program_html on
captured pages for traces) must be answered. Counts are printed.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.demo.job import DemoEpisode
from cdp_integration.errors import ReplayMissError
from cdp_integration.evaluate.scoring import evaluate_session
from cdp_integration.session.store import PARTIAL_SUFFIX, SessionWriter, load_session
from tests.integration.import_checks import report, view_and_debug

pytestmark = pytest.mark.integration


def _trace_of(episode: DemoEpisode) -> Path:
    """Where the corpus recorder saved the episode's trace (``<worker>/traces/<trajectory>/<id>.zip``)."""
    return episode.session.parent.parent / "traces" / episode.trajectory / f"{episode.task_id}.zip"


def _score(path: Path) -> tuple[str, float | None, str]:
    """("scored", score, provenance) or ("miss", None, message)."""
    session = load_session(path)
    try:
        result = evaluate_session(session, per_step=False)
    except ReplayMissError as exc:
        return "miss", None, str(exc)
    return "scored", result.score, str(result.provenance)


def _must_answer(eval_types: tuple[str, ...], fmt: str, config: dict[str, Any] | None = None) -> bool:
    """Evaluation types the format holds everything for (given the answer): they may not miss. An answer
    judged by the LLM (``fuzzy_match``) needs the judge's reply, which only our capture records."""
    references = ((config or {}).get("eval") or {}).get("reference_answers") or {}
    if "fuzzy_match" in references:  # "N/A" too: an answer other than "N/A" goes to the judge (ua_match)
        return False
    if fmt == "playwright-trace":
        return "program_html" not in eval_types
    return eval_types == ("url_match",)


def check_traces(episodes: list[DemoEpisode], out: Path) -> Counter[str]:
    """Import each traced episode (answers and configs from the live run) and compare with live."""
    counts: Counter[str] = Counter()
    traced = [e for e in episodes if _trace_of(e).exists()]
    assert len(traced) >= 10, f"only {len(traced)} traced episodes"
    for episode in traced:
        live_session = load_session(episode.session)
        where = out / f"{episode.task_id}.{episode.trajectory}"
        answers = {str(episode.task_id): live_session.final_answer}
        (where / "answers.json").parent.mkdir(parents=True, exist_ok=True)
        (where / "answers.json").write_text(json.dumps(answers))
        (where / "configs.json").write_text(json.dumps([live_session.task["config"]]))
        result = CliRunner().invoke(
            cli,
            [
                "import", "playwright-trace", str(_trace_of(episode)), "-o", str(where / "sessions"),
                "--answers", str(where / "answers.json"), "--configs", str(where / "configs.json"),
            ],
        )  # fmt: skip
        assert result.exit_code == 0, result.output + str(result.exception)
        imported = Path(result.stdout.strip())
        session = load_session(imported)
        assert session.header.options["provenance"] == "imported:playwright-trace"
        assert session.task["task_id"] == episode.task_id
        counts["imported"] += 1
        outcome, score, detail = _score(imported)
        label = f"{episode.task_id}.{episode.trajectory} {episode.eval_types}"
        if outcome == "scored":
            assert detail == "imported:playwright-trace"
            if score != episode.live:
                print(f"  SILENT {label}: imported {score} != live {episode.live}")
                counts["silent"] += 1
                continue
            counts["equal to live"] += 1
        else:
            must = _must_answer(episode.eval_types, "playwright-trace", live_session.task.get("config"))
            assert not must, f"{label}: missed: {detail}"
            print(f"  loud miss {label}: {detail[:200]}")
            counts["loud miss"] += 1
    return counts


def _labelled(episode: DemoEpisode, verified_id: int, out: Path) -> Path:
    """The corpus session with a WebArena-Verified task id (what ``export-verified`` needs), as
    ``tests/integration/test_verified_export.py`` labels demo episodes."""
    session = load_session(episode.session)
    header = session.header.model_copy(
        update={"task": {**session.header.task, "verified_task_id": verified_id}}
    )
    path = out / f"{episode.task_id}.{episode.trajectory}.session.jsonl.gz"
    writer = SessionWriter(path.with_name(path.name + PARTIAL_SUFFIX), header)
    for step in session.steps:
        writer.write_step(step)
    assert session.end is not None
    end = session.end.model_copy(update={"task": {**session.end.task, "verified_task_id": verified_id}})
    return writer.finish(end, path)


def check_verified(episodes: list[DemoEpisode], out: Path) -> Counter[str]:
    """Corpus sessions -> export-verified -> import verified: Verified's score of the imported session
    equals its score of the live session; under the WebArena scorer, url_match equals live and the
    rest is loud."""
    from cdp_integration.evaluate.verified import _official_catalog, verified_score

    shopping = sorted(
        task_id
        for task_id, task in _official_catalog().tasks.items()
        if [str(getattr(site, "value", site)) for site in task.sites] == ["shopping"]
    )
    counts: Counter[str] = Counter()
    for number, episode in enumerate(episodes):
        verified_id = shopping[number % len(shopping)]
        labelled = _labelled(episode, verified_id, out / "labelled")
        run = out / "runs" / str(number)
        exported = CliRunner().invoke(cli, ["export-verified", str(labelled), "-o", str(run)])
        if exported.exit_code != 0:
            assert "the agent made no navigation" in exported.stderr, exported.stderr
            counts["not exportable (no navigation)"] += 1
            continue
        live_session = load_session(labelled)
        (run.parent / f"{number}.configs.json").write_text(
            json.dumps([{**live_session.task["config"], "task_id": verified_id}])
        )
        result = CliRunner().invoke(
            cli,
            [
                "import", "verified", str(run), "-o", str(out / "imported" / str(number)),
                "--configs", str(run.parent / f"{number}.configs.json"),
            ],
        )  # fmt: skip
        assert result.exit_code == 0, result.output + str(result.exception)
        imported = Path(result.stdout.strip())
        live_verified = verified_score(live_session)
        imported_verified = verified_score(load_session(imported))
        assert (imported_verified.status, imported_verified.score) == (
            live_verified.status,
            live_verified.score,
        ) and _evaluated(imported_verified) == _evaluated(live_verified), (
            f"{episode.task_id}.{episode.trajectory} as Verified {verified_id}: "
            f"{imported_verified.details} != {live_verified.details}"
        )
        counts["imported"] += 1
        counts["verified equal"] += 1
        outcome, score, detail = _score(imported)
        label = f"{episode.task_id}.{episode.trajectory} {episode.eval_types}"
        if outcome == "scored":
            if score != episode.live:
                print(f"  SILENT {label}: imported {score} != live {episode.live}")
                counts["silent"] += 1
                continue
            counts["equal to live"] += 1
        else:
            assert not _must_answer(episode.eval_types, "verified"), f"{label}: missed: {detail}"
            counts["loud miss"] += 1
    return counts


def _evaluated(result: Any) -> list[tuple[Any, ...]]:
    """Each Verified evaluator's verdict and what it normalized from the response and the network."""
    return [
        (r["evaluator_name"], r["status"], r["score"], r["actual_normalized"])
        for r in result.details["evaluators_results"]
    ]


def test_playwright_traces_score_as_live(demo_corpus: list[DemoEpisode], tmp_path: Path) -> None:
    counts = check_traces(demo_corpus, tmp_path)
    report("playwright-trace", counts)
    assert counts["silent"] == 0
    assert counts["imported"] >= 10 and counts["equal to live"] >= 10


def test_verified_runs_score_as_live(demo_corpus: list[DemoEpisode], tmp_path: Path) -> None:
    counts = check_verified(demo_corpus, tmp_path)
    report("verified", counts)
    assert counts["silent"] == 0
    assert counts["verified equal"] >= 10
    # the WebArena scorer can answer only url_match from a run folder (no answer text, no DOM): every
    # recording is equal to live or loud (checked per episode), and the url_match ones are answered
    assert counts["equal to live"] + counts["loud miss"] >= 10
    assert counts["equal to live"] >= 5


def _mirror(task_id: int, intent: str, evaluators: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "sites": ["shopping"], "task_id": task_id, "intent_template_id": task_id,
        "start_urls": ["__SHOPPING__"], "intent": intent, "intent_template": intent,
        "instantiation_dict": {}, "eval": evaluators, "revision": 1,
    }  # fmt: skip


def _response(task_type: str, schema: dict[str, Any], data: list[Any] | None = None) -> dict[str, Any]:
    return {
        "evaluator": "AgentResponseEvaluator",
        "results_schema": schema,
        "expected": {"task_type": task_type, "status": "SUCCESS", "retrieved_data": data},
    }


_NULL = {"type": "null"}
VERIFIED_MIRRORS = [
    _mirror(10000, "What is the SKU of the Cast Iron Skillet 10 inch?",
            [_response("retrieve", {"type": "array", "items": {"type": "string"}}, ["DS-HK-003"])]),
    _mirror(10003, "What is the SKU of the Yoga Mat Non-Slip?",
            [_response("retrieve", {"type": "array", "items": {"type": "string"}}, ["DS-SP-001"])]),
    _mirror(10014, "Show me the products in the Sports category.",
            [_response("navigate", _NULL),
             {"evaluator": "NetworkEventEvaluator", "expected": {"url": "__SHOPPING__/products?category=Sports"}}]),
    _mirror(10018, "Open the cheapest product in the Sports category and tell me its price.",
            [_response("retrieve", {"type": "array", "items": {"type": "number", "format": "currency"}}, [29.99]),
             {"evaluator": "NetworkEventEvaluator", "expected": {"url": "__SHOPPING__/products/9"}}]),
    _mirror(10036, "Add the Bluetooth Portable Speaker to my shopping cart.",
            [_response("mutate", _NULL),
             {"evaluator": "NetworkEventEvaluator",
              "expected": {"url": "__SHOPPING__/cart/add", "http_method": "POST", "response_status": 302,
                           "post_data": {"product_id": "3", "qty": "1"}}}]),
]  # fmt: skip
"""Demo tasks whose traced episodes are scored by WebArena-Verified: the same intents written in
Verified's task format under the same ids (what the agent retrieves, where it navigates, what it
posts), so Verified's verdict of each episode is the BrowserGym live reward too."""


def test_traces_score_under_verified_as_our_capture(
    demo_corpus: list[DemoEpisode], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cdp-session eval TRACES --import playwright-trace --scorer verified``: WebArena-Verified's
    HAR evaluator on the trace's network entries (wire headers of every document, the POST bodies)
    scores each traced episode as it scores our own capture of it, and as the live reward; without
    ``--answers`` (a trace holds no answer) each is a loud ``ReplayMissError``, provenance kept."""
    from cdp_integration.evaluate.verified import verified_score

    tasks = tmp_path / "verified_tasks.json"
    tasks.write_text(json.dumps(VERIFIED_MIRRORS))
    mirrored = {task["task_id"] for task in VERIFIED_MIRRORS}
    traced = [e for e in demo_corpus if _trace_of(e).exists() and e.task_id in mirrored]
    counts: Counter[str] = Counter()
    # the corpus plays each task on a demo shop of its own: traces are scored in groups by shop
    groups: dict[tuple[str, str], list[DemoEpisode]] = {}
    for episode in traced:
        site = load_session(episode.session).task["site_urls"]["SHOPPING"]
        groups.setdefault((site, episode.trajectory), []).append(episode)
    for number, ((site, _trajectory), group) in enumerate(sorted(groups.items())):
        directory = tmp_path / f"traces-{number}"
        directory.mkdir()
        for episode in group:
            shutil.copy(_trace_of(episode), directory / _trace_of(episode).name)
        in_directory = {e.task_id: e for e in group}
        own = {task_id: load_session(e.session) for task_id, e in in_directory.items()}
        monkeypatch.setenv("SHOPPING", site)  # as WebArena's harness names its sites
        answers = tmp_path / f"{number}.answers.json"
        answers.write_text(json.dumps({str(t): s.final_answer for t, s in own.items()}))
        for with_answers in (True, False) if number == 0 else (True,):  # loud once: cheaper in make test
            out = tmp_path / f"{number}.{with_answers}"
            args = ["eval", str(directory), "--import", "playwright-trace", "--scorer", "verified",
                    "--configs", str(tasks), "-o", str(out), "--allow-unscored"]  # fmt: skip
            result = CliRunner().invoke(cli, args + (["--answers", str(answers)] if with_answers else []))
            # without answers no trace can be scored: eval writes every outcome and still fails
            assert result.exit_code == (0 if with_answers else 1), result.output
            lines = [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]
            for line in lines:
                task_id = int(line["instance_id"])
                if task_id not in in_directory:
                    continue
                outcome = line["test_result"]
                label = f"{task_id}.{in_directory[task_id].trajectory} (answers: {with_answers})"
                assert outcome["provenance"] == "imported:playwright-trace", label
                if not with_answers:
                    assert outcome["error_type"] == "ReplayMissError", (label, outcome)
                    assert "--answers" in outcome["error"]
                    counts["loud miss"] += 1
                    continue
                counts["imported"] += 1
                ours = verified_score(own[task_id], tasks_file=tasks)
                imported_path = out / "imported" / f"{task_id}.session.jsonl.gz"
                imported = verified_score(load_session(imported_path), tasks_file=tasks)
                if (
                    (outcome["score"], imported.score) != (ours.score, ours.score)
                    or _evaluated(imported) != _evaluated(ours)
                    or ours.score != in_directory[task_id].live
                ):
                    print(
                        f"  SILENT {label}: {outcome['score']} / ours {ours.score} / live {in_directory[task_id].live}"
                    )
                    counts["silent"] += 1
                    continue
                counts["equal to live"] += 1
    report("playwright-trace-verified", counts)
    assert counts["silent"] == 0
    assert counts["imported"] >= 8 and counts["equal to live"] == counts["imported"]
    assert counts["loud miss"] == len(sorted(groups.items())[0][1]) > 0


def test_view_and_debug_work_on_imported_traces_and_run_folders(
    demo_corpus: list[DemoEpisode], tmp_path: Path
) -> None:
    episode = next(e for e in demo_corpus if _trace_of(e).exists() and "program_html" in e.eval_types)
    result = CliRunner().invoke(
        cli, ["import", "playwright-trace", str(_trace_of(episode)), "-o", str(tmp_path / "trace")]
    )
    assert result.exit_code == 0, result.output
    view_and_debug(Path(result.stdout.strip()), tmp_path / "trace")
    # a Verified run folder (export-verified of an episode that navigated twice or more)
    episode = next(e for e in demo_corpus if len(load_session(e.session).steps) >= 3 and e.task_id == 10036)
    from cdp_integration.evaluate.verified import _official_catalog

    shopping = min(
        task_id
        for task_id, task in _official_catalog().tasks.items()
        if [str(getattr(site, "value", site)) for site in task.sites] == ["shopping"]
    )
    labelled = _labelled(episode, shopping, tmp_path / "labelled")
    exported = CliRunner().invoke(cli, ["export-verified", str(labelled), "-o", str(tmp_path / "run")])
    assert exported.exit_code == 0, exported.output
    result = CliRunner().invoke(
        cli, ["import", "verified", str(tmp_path / "run"), "-o", str(tmp_path / "verified")]
    )
    assert result.exit_code == 0, result.output
    view_and_debug(Path(result.stdout.strip()), tmp_path / "verified")


@contextlib.contextmanager
def _shared_playwright() -> Iterator[Any]:
    """The process's one sync Playwright: BrowserGym's, which earlier tests of the run may have started
    (a second ``sync_playwright()`` in the same thread fails)."""
    import browsergym.core

    yield browsergym.core._get_global_playwright()


def _navigating_click_trace(base_url: str, path: Path) -> str:
    """A real trace whose last action is a click that navigates with no snapshot of the new page
    (the response is held back until after the click returned); returns the live page's final URL."""
    import threading

    from playwright.sync_api import Route

    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable

    release = threading.Event()
    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            page = context.new_page()
            context.tracing.start(snapshots=True, screenshots=True)
            page.goto(base_url + "/search?q=speaker")

            def held(route: Route) -> None:
                release.wait(timeout=30)
                route.continue_()

            page.route("**/products/3", held)
            page.click("#results .product-link", no_wait_after=True)
            release.set()
            page.wait_for_url("**/products/3", wait_until="commit")
            context.tracing.stop(path=str(path))
            return page.url
        finally:
            browser.close()


def test_a_navigation_with_no_later_snapshot_is_a_loud_miss(demo_site: Any, tmp_path: Path) -> None:
    live_url = _navigating_click_trace(demo_site.base_url, tmp_path / "traces" / "7.zip")
    result = CliRunner().invoke(
        cli, ["import", "playwright-trace", str(tmp_path / "traces"), "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    session = load_session(result.stdout.strip())
    final = session.final_step
    assert final.url == live_url and final.url.endswith("/products/3")
    assert final.active_tab is not None and final.active_tab.html is None  # not the search page's DOM
    assert any(
        "loaded after the trace's last snapshot" in lack
        for lack in session.header.options["imported"]["lacks"]
    )

    def config(evaluation: dict[str, Any]) -> dict[str, Any]:
        return {"task_id": 7, "sites": ["shopping"], "intent": "open the speaker", "eval": evaluation}

    url_match = config({"eval_types": ["url_match"], "reference_url": live_url, "url_note": "GOLD in PRED"})
    assert evaluate_session(session, url_match, per_step=False).score == 1.0
    program_html = config(
        {
            "eval_types": ["program_html"],
            "program_html": [
                {
                    "url": "last",
                    "locator": "",
                    "required_contents": {"must_include": ["Bluetooth Portable Speaker"]},
                }
            ],
        }
    )
    with pytest.raises(ReplayMissError, match="no captured page"):
        evaluate_session(session, program_html, per_step=False)


def test_eval_scores_a_directory_of_traces_directly(demo_corpus: list[DemoEpisode], tmp_path: Path) -> None:
    """``cdp-session eval --import playwright-trace DIR``: imported into OUTPUT/imported, then scored."""
    traced = [e for e in demo_corpus if _trace_of(e).exists() and e.eval_types == ("url_match",)]
    directory = _trace_of(traced[0]).parent
    in_directory = [e for e in traced if _trace_of(e).parent == directory]
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([load_session(e.session).task["config"] for e in in_directory]))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(directory),
            "--import",
            "playwright-trace",
            "--configs",
            str(configs),
            "-o",
            str(tmp_path / "out"),
            "--allow-unscored",  # configs are given for the url_match traces only
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    # every trace is imported; the url_match ones (configs given) are scored, all equal to live
    assert len(list((tmp_path / "out" / "imported").glob("*.session.jsonl.gz"))) == len(
        list(directory.glob("*.zip"))
    )
    assert report["provenance"] == {"imported:playwright-trace": len(in_directory)}
    lines = [json.loads(line) for line in (tmp_path / "out" / "output.jsonl").read_text().splitlines()]
    scores = {
        line["instance_id"]: line["test_result"]["score"]
        for line in lines
        if line["test_result"]["score"] is not None
    }
    assert scores == {str(e.task_id): e.live for e in in_directory}


TYPED = "() => [document.querySelector('#username').value, document.querySelector('#username').defaultValue]"


def test_typed_values_answer_on_the_agents_page_and_not_on_a_fresh_load(
    demo_site: Any, tmp_path: Path
) -> None:
    """A trace of a form filled and not submitted: the page as the agent left it answers with what was
    typed, a fresh load of its URL (the evaluator's own ``goto``) with the page's defaults, as live."""
    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable
    from cdp_integration.replay import replay_step

    url = demo_site.base_url + "/login?next=/account"
    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            page.goto(url)
            page.fill("#username", "typed, not submitted")
            page.title()  # an action after the fill: its snapshot holds the typed value
            as_left = page.evaluate(TYPED)
            fresh_page = context.new_page()
            fresh_page.goto(url)
            fresh = fresh_page.evaluate(TYPED)
            fresh_page.close()
            context.tracing.stop(path=str(tmp_path / "traces" / "8.zip"))
        finally:
            browser.close()
    assert as_left == ["typed, not submitted", ""] and fresh == ["", ""]
    result = CliRunner().invoke(
        cli, ["import", "playwright-trace", str(tmp_path / "traces"), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    session = load_session(result.stdout.strip())
    tab = session.final_step.active_tab
    assert tab is not None and tab.html is not None and "typed, not submitted" not in tab.html
    assert [c.value for c in tab.form_state] == ["typed, not submitted"]
    replayed = replay_step(session, -1)
    assert replayed.evaluate(TYPED) == as_left
    offline_fresh = replayed.context.new_page()
    offline_fresh.goto(url)
    assert offline_fresh.evaluate(TYPED) == fresh


FRAMES = """() => [
    document.querySelector('#inner').contentDocument.querySelector('#x').textContent,
    document.querySelector('#other').contentDocument === null,
]"""


def test_same_origin_child_frames_answer_as_live(tmp_path: Path) -> None:
    """A trace of a page with a same-origin and a cross-origin ``<iframe>`` (served by Playwright's
    router in real Chromium): the imported page reads the same-origin frame's document as live and,
    as live, not the cross-origin one (Playwright snapshots it; the import leaves it out)."""
    from playwright.sync_api import Route

    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable
    from cdp_integration.replay import replay_step

    pages = {
        "http://frames.test/": "<title>Parent</title><h1>Parent</h1>"
        "<iframe id='inner' src='/child.html'></iframe><iframe id='other' src='http://other.test/'></iframe>",
        "http://frames.test/child.html": "<p id='x'>in the child frame</p>",
        "http://other.test/": "<p id='x'>another site</p>",
    }

    def serve(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body=pages.get(route.request.url, ""))

    with _shared_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context()
            context.route("**/*", serve)
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            page.goto("http://frames.test/")
            page.click("h1")
            live = page.evaluate(FRAMES)
            context.tracing.stop(path=str(tmp_path / "traces" / "9.zip"))
        finally:
            browser.close()
    assert live == ["in the child frame", True]
    result = CliRunner().invoke(
        cli, ["import", "playwright-trace", str(tmp_path / "traces"), "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    session = load_session(result.stdout.strip())
    tab = session.final_step.active_tab
    assert tab is not None and [f.url for f in tab.frames] == ["http://frames.test/child.html"]
    assert replay_step(session, -1).evaluate(FRAMES) == live
