"""Raw WebArena configs (``__SHOPPING__`` placeholders) score imported Playwright traces as live, given the
sites' URLs by ``--site-url`` or ``WA_<SITE>``.

A real Chromium plays two demo tasks on the demo shop under Playwright tracing; the official evaluator
scores each live on the same page (its visits traced, as WebArena's run.py does); then the traces are
imported with the demo's raw configs and scored offline with ``cdp-session eval``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.capture.probes import build_trajectory
from cdp_integration.cli import cli
from cdp_integration.demo import DemoSite
from cdp_integration.demo.tasks import site_urls
from cdp_integration.session.store import load_session
from cdp_integration.webarena import substitute_placeholders, use_site_urls, webarena_config_file

TASKS = {
    # string_match + url_match on __SHOPPING__/products/9: the cheapest sports product's price
    10018: [
        ("goto", "/products?category=Sports&sort=price"),
        ("click", "#results .product-item:first-child .product-link"),
    ],
    # program_html on __SHOPPING__/cart, a page the evaluator opens itself
    10036: [("goto", "/search?q=speaker"), ("click", "#results .product-link"), ("click", "#add-to-cart")],
}
ANSWER_SELECTOR = {10018: "#product-price"}


def _raw_configs() -> list[dict[str, Any]]:
    tasks = json.loads((Path(__file__).parents[2] / "cdp_integration/demo/tasks.json").read_text())
    configs = [task["config"] for task in tasks if task["config"]["task_id"] in TASKS]
    assert all("__SHOPPING__" in json.dumps(config) for config in configs)
    for config in configs:  # the cart's table, not page.content(): a trace snapshot lacks the page's scripts
        for check in config["eval"]["program_html"]:
            if check["locator"] == "":
                check["locator"] = "document.querySelector('#cart').outerText"
    return configs


def _live_score(page: Any, config: dict[str, Any], answer: str | None) -> float:
    from webarena.evaluation_harness.evaluators import evaluator_router

    with webarena_config_file(config) as config_file:
        evaluator = evaluator_router(config_file)
        trajectory = build_trajectory(answer, stopped=answer is not None)
        return float(evaluator(trajectory=trajectory, config_file=config_file, page=page, client=None))


def _play(
    site: DemoSite, configs: list[dict[str, Any]], traces: Path
) -> tuple[dict[str, float], dict[str, str]]:
    """Each task played and traced in a fresh context; the live scores and the agent's answers by task id."""
    import browsergym.core

    from cdp_integration.environment import CHROMIUM_ARGS, headless_executable

    urls = site_urls(site.base_url)
    live: dict[str, float] = {}
    answers: dict[str, str] = {}
    playwright = browsergym.core._get_global_playwright()
    browser = playwright.chromium.launch(executable_path=headless_executable(), args=list(CHROMIUM_ARGS))
    try:
        for config in configs:
            task_id = config["task_id"]
            context = browser.new_context()
            context.tracing.start(snapshots=True, screenshots=False)
            page = context.new_page()
            for action, target in TASKS[task_id]:
                if action == "goto":
                    page.goto(site.base_url + target)
                else:
                    page.click(target)
                    page.wait_for_load_state()
            answer = None
            if task_id in ANSWER_SELECTOR:
                answer = answers[str(task_id)] = page.inner_text(ANSWER_SELECTOR[task_id]).strip()
            with use_site_urls(urls):
                live[str(task_id)] = _live_score(page, substitute_placeholders(config, urls), answer)
            context.tracing.stop(path=str(traces / f"{task_id}.zip"))
            context.close()
    finally:
        browser.close()
    return live, answers


def _scores(output_dir: Path) -> dict[str, tuple[float | None, str | None]]:
    lines = [orjson.loads(line) for line in (output_dir / "output.jsonl").read_bytes().splitlines()]
    return {
        str(line["instance"]["task_id"] or line["instance_id"]): (
            line["test_result"]["score"],
            line["test_result"]["error"],
        )
        for line in lines
    }


def test_raw_configs_score_imported_traces_as_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("WEBARENA_BASE_URL", "WA_SHOPPING", "WA_SHOPPING_ADMIN"):
        monkeypatch.delenv(variable, raising=False)
    configs = _raw_configs()
    (tmp_path / "test.raw.json").write_text(json.dumps(configs))
    traces = tmp_path / "traces"
    traces.mkdir()
    with DemoSite() as site:
        urls = site_urls(site.base_url)
        live, answers = _play(site, configs, traces)
    assert live == {"10018": 1.0, "10036": 1.0}
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    runner = CliRunner()
    common = ["--configs", str(tmp_path / "test.raw.json"), "--answers", str(tmp_path / "answers.json")]
    flags = [
        "--site-url",
        f"shopping={urls['SHOPPING']}",
        "--site-url",
        f"shopping_admin={urls['SHOPPING_ADMIN']}",
    ]

    # Without any site URL, the raw configs' placeholders cannot be filled: a loud error per session.
    bare = runner.invoke(
        cli, ["import", "playwright-trace", str(traces), "-o", str(tmp_path / "bare"), *common]
    )
    assert bare.exit_code == 0, bare.output
    assert "site_urls" not in load_session(tmp_path / "bare" / "10018.session.jsonl.gz").task
    failed = runner.invoke(cli, ["eval", str(tmp_path / "bare"), "-o", str(tmp_path / "bare-eval")])
    assert failed.exit_code == 1, failed.output  # the run finished; no session could be scored
    assert "none of its 2 sessions could be scored" in failed.output
    assert len(_scores(tmp_path / "bare-eval")) == 2
    assert all(
        score is None and error is not None and "no SHOPPING URL is known" in error
        for score, error in _scores(tmp_path / "bare-eval").values()
    )

    # --site-url at import: the URLs travel in the sessions, and eval needs nothing more.
    imported = runner.invoke(
        cli, ["import", "playwright-trace", str(traces), "-o", str(tmp_path / "sessions"), *common, *flags]
    )
    assert imported.exit_code == 0, imported.output
    assert (
        load_session(tmp_path / "sessions" / "10036.session.jsonl.gz").task["site_urls"]["SHOPPING"]
        == urls["SHOPPING"]
    )
    scored = runner.invoke(cli, ["eval", str(tmp_path / "sessions"), "-o", str(tmp_path / "eval")])
    assert scored.exit_code == 0, scored.output
    assert {task: score for task, (score, _) in _scores(tmp_path / "eval").items()} == live

    # --site-url at eval, for sessions imported without URLs; and WA_<SITE> does the same.
    at_eval = runner.invoke(cli, ["eval", str(tmp_path / "bare"), "-o", str(tmp_path / "eval-flag"), *flags])
    assert at_eval.exit_code == 0, at_eval.output
    assert {task: score for task, (score, _) in _scores(tmp_path / "eval-flag").items()} == live
    monkeypatch.setenv("WA_SHOPPING", urls["SHOPPING"])
    by_variable = runner.invoke(cli, ["eval", str(tmp_path / "bare"), "-o", str(tmp_path / "eval-env")])
    assert by_variable.exit_code == 0, by_variable.output
    assert {task: score for task, (score, _) in _scores(tmp_path / "eval-env").items()} == live

    # --import in one command, with --site-url.
    direct = runner.invoke(
        cli,
        [
            "eval",
            str(traces),
            "--import",
            "playwright-trace",
            "-o",
            str(tmp_path / "direct"),
            *common,
            *flags,
        ],
    )
    assert direct.exit_code == 0, direct.output
    assert {task: score for task, (score, _) in _scores(tmp_path / "direct").items()} == live


def test_a_bad_site_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--site-url", "shoping=http://h"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "cdp-session: error: 'shoping=http://h': unknown site 'shoping' (one of shopping, shopping_admin, "
        "reddit, gitlab, wikipedia, map, homepage)"
    ]
