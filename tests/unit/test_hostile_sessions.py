"""Session files are untrusted input: crafted ones must not run code, escape a directory, hang or exhaust memory.

Browser-free cases. The crafted files are real session files written by ``SessionWriter`` (or bytes
shaped like one); every ``func:`` payload would create a marker file in the test's temp dir if it
ever ran, and each test checks the marker is absent. Resource cases run the CLI in a fresh
subprocess under a 3 GB address-space limit and report its peak RSS.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration import webarena
from cdp_integration.cli import cli
from cdp_integration.demo.tasks import load_demo_tasks
from cdp_integration.errors import SessionFormatError, UntrustedConfigError
from cdp_integration.har.importer import load_har
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import FORMAT_VERSION, SessionEnd, Step, TabState
from cdp_integration.session.redact import Redactor
from cdp_integration.session.store import SessionWriter, load_session, new_header
from cdp_integration.webarena import (
    OFFICIAL_HELPERS,
    substitute_placeholders,
    vet_config,
    webarena_config_file,
)
from tests.hostile import run_cli_limited

SITE = "http://shop.test"
TEST_RAW = Path(next(iter(__import__("webarena").__path__))) / "test.raw.json"
OFFICIAL_URLS = {
    "SHOPPING": "http://metis.lti.cs.cmu.edu:7770",
    "SHOPPING_ADMIN": "http://metis.lti.cs.cmu.edu:7780/admin",
    "REDDIT": "http://metis.lti.cs.cmu.edu:9999",
    "GITLAB": "http://metis.lti.cs.cmu.edu:8023",
    "WIKIPEDIA": "http://metis.lti.cs.cmu.edu:8888",
    "MAP": "http://metis.lti.cs.cmu.edu:3000",
    "HOMEPAGE": "http://metis.lti.cs.cmu.edu:4399",
}
GB = 1024**3


def payload(marker: Path) -> str:
    """Python that creates ``marker`` if it is ever evaluated."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def string_match_config(task_id: Any = 77001) -> dict[str, Any]:
    return {
        "sites": ["shopping"],
        "task_id": task_id,
        "intent_template_id": 770,
        "start_url": "__SHOPPING__",
        "intent": "Name the product",
        "eval": {
            "eval_types": ["string_match"],
            "reference_answers": {"exact_match": "Mug"},
            "reference_url": "",
            "program_html": [],
        },
    }


def write_session(
    path: Path,
    *,
    config: dict[str, Any] | None = None,
    urls: list[str] | None = None,
    site_urls: dict[str, str] | None = None,
    finished: bool = True,
    answer: str = "Mug",
    action: str | None = "click('12')",
    tab_html: str = "<html><body><h1>Mug</h1></body></html>",
) -> Path:
    """A small real session file: one tab per step, the task's config and site URLs in the header."""
    task: dict[str, Any] = {"site_urls": site_urls or {"SHOPPING": SITE}}
    if config is not None:
        task["config"] = config
        task["task_id"] = config.get("task_id")
    writer = SessionWriter(
        path.with_name(path.name + ".partial"), new_header(instance_id=path.stem, task=task)
    )
    for index, url in enumerate(urls or [f"{SITE}/", f"{SITE}/products/1"]):
        tab = TabState(tab_id="T1", url=url, title="Shop", active=True, html=tab_html)
        writer.write_step(
            Step(
                index=index,
                trigger="action",
                action=action if index else None,
                timestamp=0.0,
                url=url,
                title="Shop",
                tabs=[tab],
            )
        )
    if not finished:
        writer.abort()
        writer.partial_path.rename(path)
        return path
    return writer.finish(SessionEnd(ended=0.0, final_answer=answer), path)


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, stderr: str, *, contains: str = "") -> None:
    lines = stderr.strip().splitlines()
    assert code == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("cdp-session: error: "), stderr
    assert "Traceback" not in stderr
    assert contains in lines[0], lines[0]


# -- no code from a session runs -----------------------------------------------------------------


def official_configs() -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = json.loads(TEST_RAW.read_text())
    return configs


def test_the_helper_table_is_exactly_what_webarena_uses() -> None:
    """Every func: form of the 812 official configs, as (field, helper, argument kinds)."""
    import ast

    seen: dict[str, dict[str, tuple[str, ...]]] = {"url": {}, "locator": {}}
    for config in official_configs():
        for target in config["eval"]["program_html"]:
            for field in ("url", "locator"):
                value = target[field]
                if value.startswith("func:"):
                    call = ast.parse(value.split("func:")[1], mode="eval").body
                    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    kinds = tuple("page" if isinstance(a, ast.Name) else "str" for a in call.args)
                    seen[field][call.func.id] = kinds
    assert seen == OFFICIAL_HELPERS


def test_all_official_and_demo_configs_pass_vetting_with_real_urls() -> None:
    configs = official_configs()
    assert len(configs) == 812
    post = f"{OFFICIAL_URLS['REDDIT']}/f/books/59421/my-post-about-books"
    for config in configs:
        resolved = substitute_placeholders(config, OFFICIAL_URLS)
        vet_config(resolved, page_urls=[post, OFFICIAL_URLS["SHOPPING"] + "/checkout/onepage/success/"])
    demo_urls = {site: "http://127.0.0.1:8123" for site in OFFICIAL_URLS}
    tasks = load_demo_tasks()
    assert len(tasks) == 45
    for task in tasks:
        vet_config(
            substitute_placeholders(task.config, demo_urls),
            page_urls=["http://127.0.0.1:8123/forums/f/a/1/t"],
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", "func:__import__('os').system('true') or 'last'"),
        ("url", "func:reddit_get_post_url('__last_url__') or __import__('os')"),
        ("url", "func:reddit_get_post_url(__import__('os').getcwd())"),
        ("url", "func:reddit_get_post_url(f'{__import__(\"os\").getcwd()}')"),
        ("url", "func:shopping_get_latest_order_url(x=1)"),
        ("url", "func:reddit_get_post_url('a', 'b')"),
        ("url", "funcreddit_get_post_url('__last_url__')"),
        ("url", "func:(lambda: 0)()"),
        ("locator", "func:gitlab_get_project_memeber_role(__page__, 'byteblaze'); 1"),
        ("locator", "func:gitlab_get_project_memeber_role(__page__.context, 'byteblaze')"),
        ("locator", "func:shopping_get_sku_latest_review_author('x' + 'y')"),
        ("locator", "func:reddit_get_post_url('http://x/f/a/1/')"),
        ("locator", "func:getattr(__page__, 'goto')('http://x')"),
        ("url", "func:shopping_get_sku_latest_review_author('x')"),
    ],
)
def test_crafted_func_fields_are_refused_naming_the_field(field: str, value: str) -> None:
    config = {"eval": {"program_html": [{"url": "last", "locator": "", "required_contents": {}}]}}
    config["eval"]["program_html"][0][field] = value
    with pytest.raises(UntrustedConfigError, match=rf"^eval\.program_html\[0\]\.{field}: "):
        vet_config(config, page_urls=[f"{SITE}/"])


@pytest.mark.parametrize(
    "url",
    [
        "http://x/f/a/1/'+str(__import__('os').getcwd())+'",
        "http://x/')+__import__('os').getcwd()+('",
        "http://x/'\n+__import__('os').getcwd()+'",
        "http://x/'''+__import__('os').getcwd()+'''",
    ],
)
def test_a_page_url_cannot_break_out_of_its_literal_even_in_a_trusted_config(url: str) -> None:
    config = {"eval": {"program_html": [{"url": "func:reddit_get_post_url('__last_url__')", "locator": ""}]}}
    with pytest.raises(UntrustedConfigError, match=r"eval\.program_html\[0\]\.url"):
        vet_config(config, page_urls=[url])
    with pytest.raises(UntrustedConfigError, match=r"eval\.program_html\[0\]\.url"):
        vet_config(config, page_urls=[url], trusted=True)


def test_trusted_configs_may_use_other_python_but_untrusted_may_not() -> None:
    config = {"eval": {"program_html": [{"url": "func:'http://x/' + 'orders'", "locator": ""}]}}
    vet_config(config, page_urls=[f"{SITE}/"], trusted=True)
    with pytest.raises(UntrustedConfigError):
        vet_config(config, page_urls=[f"{SITE}/"])


def test_eval_guard_calls_the_helper_without_eval_and_refuses_anything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What reaches the evaluator module's ``eval`` is checked again at the call site."""
    for site, url in OFFICIAL_URLS.items():  # the evaluator modules read them at import
        monkeypatch.setenv(site, os.environ.get(site) or url)
    import webarena.evaluation_harness.evaluators as evaluators

    from cdp_integration.webarena import guard_evaluator_eval

    config = {"eval": {"program_html": [{"url": "func:reddit_get_post_url('__last_url__')", "locator": ""}]}}
    marker = tmp_path / "pwned"

    def evaluate(expression: str) -> Any:
        scope: dict[str, Any] = {"expression": expression, "page": None}
        exec("result = eval(expression)", vars(evaluators), scope)  # the name resolves as in the module
        return scope["result"]

    with guard_evaluator_eval(config):
        assert evaluate("reddit_get_post_url('http://r/f/books/12/title')") == "http://r/f/books/12/"
        with pytest.raises(UntrustedConfigError):
            evaluate(payload(marker))
        with pytest.raises(UntrustedConfigError):
            evaluate(f"reddit_get_post_url('http://r/'+str({payload(marker)})+'')")
    with guard_evaluator_eval(config, trusted=True):
        assert evaluate("reddit_get_post_url('http://r/f/books/12/title')") == "http://r/f/books/12/"
        with pytest.raises(UntrustedConfigError):
            evaluate(f"reddit_get_post_url('http://r/'+str({payload(marker)})+'')")
    assert "eval" not in vars(evaluators)  # the module is as it was
    assert not marker.exists()


def test_func_in_an_embedded_config_never_runs_through_eval_or_rescore(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    config = string_match_config()
    config["eval"]["eval_types"] = ["program_html"]
    config["eval"]["program_html"] = [
        {
            "url": f"func:{payload(marker)} or 'last'",
            "locator": "",
            "required_contents": {"must_include": ["x"]},
        }
    ]
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    path = write_session(sessions / "evil.session.jsonl.gz", config=config)
    code, _, stderr = run_cli("rescore", str(path))
    assert_one_line_error(code, stderr, contains="eval.program_html[0].url")
    code, _, stderr = run_cli(
        "eval", str(sessions), "-o", str(tmp_path / "out"), "--no-progress", "--trust-configs"
    )
    assert code == 1, stderr  # refused, so not scored
    line = orjson.loads((tmp_path / "out" / "output.jsonl").read_bytes())
    assert line["test_result"]["error_type"] == "UntrustedConfigError"
    assert not marker.exists()


def test_a_site_url_cannot_inject_config_keys(tmp_path: Path) -> None:
    """Placeholders are substituted in parsed values: a crafted site URL stays one string."""
    from cdp_integration.evaluate.scoring import session_config

    marker = tmp_path / "pwned"
    evil = f'{SITE}", "url": "func:{payload(marker)}", "zz": "'
    config = string_match_config()
    config["eval"]["program_html"] = [{"url": "__SHOPPING__/cart", "locator": "", "required_contents": {}}]
    path = write_session(tmp_path / "s.session.jsonl.gz", config=config, site_urls={"SHOPPING": evil})
    resolved = session_config(load_session(path), config)
    target = resolved["eval"]["program_html"][0]
    assert set(target) == {"url", "locator", "required_contents"}
    assert target["url"] == evil + "/cart"
    vet_config(resolved, trusted=True)
    vet_config(resolved)
    assert not marker.exists()


def test_the_temporary_config_file_is_not_named_by_the_task_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In memory where the system allows it (nothing on disk, nothing left), else a fixed name in a
    fresh private directory; never a name from the config, and gone after the block either way."""
    escape = tmp_path / "escaped"
    config = string_match_config(task_id=f"../../../../../../..{escape}")
    with webarena_config_file(config) as name:
        assert name.startswith("/proc/self/fd/") and "memfd:cdp-eval-config" in os.readlink(name)
        assert json.loads(Path(name).read_text())["task_id"] == config["task_id"]
        assert json.loads(Path(name).read_text())["task_id"] == config["task_id"]  # opens again
    assert not os.path.exists(name) or "cdp-eval-config" not in os.readlink(name)  # closed
    monkeypatch.setattr(webarena, "_memory_file", lambda data: None)
    with webarena_config_file(config) as name:
        path = Path(name)
        assert path.name == "config.json" and path.parent.name.startswith("cdp-eval-")
        assert json.loads(path.read_text())["task_id"] == config["task_id"]
    assert not path.exists() and not path.parent.exists()
    assert not list(tmp_path.iterdir())


# -- bounded loading -----------------------------------------------------------------------------


def run_limited(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """``cdp-session ARGS`` in a fresh process under RLIMIT_AS = 3 GB: (exit code, stderr, peak RSS bytes).

    Through ``tests.hostile``'s launcher, so the peak RSS is the CLI's own, not this process's."""
    run = run_cli_limited(*args, env=env, address_space=3 * GB, timeout=120)
    return run.returncode, run.stderr, run.peak_rss


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.session.jsonl.gz"
    os.mkfifo(fifo)
    with pytest.raises(SessionFormatError, match="not a regular file"):
        load_session(fifo)
    with pytest.raises(SessionFormatError, match="not a regular file"):
        load_har(fifo)
    code, stderr, _ = run_limited(tmp_path, "info", str(fifo))
    assert_one_line_error(code, stderr, contains="not a regular file")
    code, _, stderr = run_cli("eval", str(tmp_path), "-o", str(tmp_path / "out"), "--no-progress")
    assert code == 1, stderr  # not scored: the run says so in its exit status
    line = orjson.loads((tmp_path / "out" / "output.jsonl").read_bytes())
    assert line["test_result"]["error_type"] == "SessionFormatError"


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.session.jsonl.gz"
    link.symlink_to("/dev/zero")
    code, stderr, rss = run_limited(tmp_path, "info", str(link))
    assert_one_line_error(code, stderr, contains="not a regular file")
    assert rss < GB


def test_an_object_bomb_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """~220 KB compressed, ~200 MB inflated: one blob of millions of ``{}``."""
    header = orjson.dumps({"type": "header", "format_version": FORMAT_VERSION, "created": 0, "tool": "t"})
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [compressor.compress(header + b'\n{"type": "blob", "id": "b", "data": [')]
    chunk = b"{}," * 1_000_000
    parts += [compressor.compress(chunk) for _ in range(70)]
    parts.append(compressor.compress(b"{}]}\n") + compressor.flush())
    bomb = tmp_path / "bomb.session.jsonl.gz"
    bomb.write_bytes(b"".join(parts))
    assert bomb.stat().st_size < 300_000
    code, stderr, rss = run_limited(tmp_path, "info", str(bomb))
    assert_one_line_error(code, stderr, contains="JSON values")
    assert rss < GB


def test_a_million_tiny_steps_are_refused_at_the_step_limit(tmp_path: Path) -> None:
    header = orjson.dumps({"type": "header", "format_version": FORMAT_VERSION, "created": 0, "tool": "t"})
    step = b'{"type":"step","index":0,"trigger":"t","timestamp":0,"url":"","title":"","tabs":[]}\n'
    path = tmp_path / "many.session.jsonl.gz"
    path.write_bytes(gzip.compress(header + b"\n" + step * 1_000_000, compresslevel=6))
    code, stderr, rss = run_limited(tmp_path, "info", str(path))
    assert_one_line_error(code, stderr, contains="steps")
    assert rss < GB
    fewer = tmp_path / "fewer.session.jsonl.gz"
    fewer.write_bytes(gzip.compress(header + b"\n" + step * 25_000, compresslevel=6))
    code, stderr, _ = run_limited(tmp_path, "info", str(fewer))
    assert_one_line_error(code, stderr, contains="more than 20000 steps")
    code, stderr, _ = run_limited(tmp_path, "info", str(fewer), env={"CDP_SESSION_MAX_STEPS": "30000"})
    assert code == 0, stderr  # the limit is the user's to raise


def test_har_import_is_bounded_in_values_and_depth() -> None:
    bomb = b'{"log": {"version": "1.2", "entries": [' + b"{}," * 100 + b"{}]}}"
    with pytest.raises(SessionFormatError, match="more than 50 JSON values"):
        load_har(bomb, limits=SessionLimits(max_values=50))
    deep = b'{"log": {"version": "1.2", "entries": [], "x": ' + b"[" * 200 + b"]" * 200 + b"}}"
    with pytest.raises(SessionFormatError, match="nested deeper than 128"):
        load_har(deep)


def test_limits_are_raisable_through_the_api_and_the_environment(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.jsonl.gz", urls=[f"{SITE}/{i}" for i in range(5)])
    with pytest.raises(SessionFormatError, match="more than 3 steps"):
        load_session(path, limits=SessionLimits(max_steps=3))
    assert len(load_session(path, limits=SessionLimits(max_steps=5)).steps) == 5
    assert SessionLimits.from_env({"CDP_SESSION_MAX_STEPS": "7"}).max_steps == 7
    with pytest.raises(SessionFormatError, match="CDP_SESSION_MAX_DEPTH"):
        SessionLimits.from_env({"CDP_SESSION_MAX_DEPTH": "-1"})


def deep_session(tmp_path: Path, depth: int) -> Path:
    """A real session whose first step holds a DOM snapshot nested ``depth`` levels deep."""
    path = write_session(tmp_path / f"deep{depth}.session.jsonl.gz")
    records = [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    step = next(record for record in records if record["type"] == "step")
    step["tabs"][0]["dom_snapshot"] = "@@deep@@"
    nested = b'{"a":[' * depth + b'"x"' + b"]}" * depth
    lines = [orjson.dumps(record).replace(b'"@@deep@@"', nested) + b"\n" for record in records]
    path.write_bytes(gzip.compress(b"".join(lines)))
    return path


@pytest.mark.parametrize("depth", [300, 1000])
def test_deep_nesting_is_one_line_on_show_json_and_redact(tmp_path: Path, depth: int) -> None:
    path = deep_session(tmp_path, depth)
    for args in (
        ["show", str(path), "1", "--json"],
        ["redact", str(path), "-o", str(tmp_path / "r.session.jsonl.gz")],
    ):
        code, _, stderr = run_cli(*args)
        assert_one_line_error(code, stderr)
        assert "nested deeper than 128 levels" in stderr or "depth limit exceeded" in stderr


def test_nesting_within_the_limit_still_shows_and_redacts(tmp_path: Path) -> None:
    path = deep_session(tmp_path, 50)
    code, _, stderr = run_cli("show", str(path), "1", "--json")
    assert code == 0, stderr
    code, _, stderr = run_cli("redact", str(path), "-o", str(tmp_path / "r.session.jsonl.gz"))
    assert code == 0, stderr


@pytest.mark.parametrize("version", [0, -7, True, "1", 1.0, None])
def test_bad_format_versions_are_refused(tmp_path: Path, version: Any) -> None:
    path = tmp_path / "v.session.jsonl"
    path.write_bytes(
        orjson.dumps({"type": "header", "format_version": version, "created": 0, "tool": "t"}) + b"\n"
    )
    code, _, stderr = run_cli("info", str(path))
    assert_one_line_error(code, stderr, contains="format_version")


def test_a_future_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.session.jsonl"
    header = {"type": "header", "format_version": FORMAT_VERSION + 1, "created": 0, "tool": "t"}
    path.write_bytes(orjson.dumps(header) + b"\n")
    code, _, stderr = run_cli("info", str(path))
    assert_one_line_error(code, stderr, contains="upgrade")


# -- every CLI path: one line ------------------------------------------------------------------


def test_a_100k_character_action_renders_in_view_and_export_wabe(tmp_path: Path) -> None:
    action = "click(" + "-" * 100_000 + "1)"
    path = write_session(tmp_path / "long.session.jsonl.gz", action=action)
    code, _, stderr = run_cli("view", str(path), "-o", str(tmp_path / "v.html"))
    assert code == 0, stderr
    code, _, stderr = run_cli("export-wabe", str(path), "-o", str(tmp_path / "wabe"))
    assert code == 0, stderr
    code, _, stderr = run_cli("steps", str(path))
    assert code == 0, stderr


@pytest.mark.parametrize("target", ["missing/x", "."])
def test_unwritable_outputs_are_one_line(tmp_path: Path, target: str) -> None:
    path = write_session(tmp_path / "s.session.jsonl.gz")
    out = str(tmp_path / target)
    commands = [["har", str(path), "-o", out], ["schema", "-o", out]]
    if target == ".":  # redact and view create missing parent directories
        commands += [["redact", str(path), "-o", out], ["view", str(path), "-o", out]]
    for args in commands:
        code, _, stderr = run_cli(*args)
        assert_one_line_error(code, stderr)


def test_rescore_with_a_config_the_evaluator_chokes_on_is_one_line(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.jsonl.gz", config=string_match_config())
    broken = string_match_config()
    broken["eval"]["eval_types"] = ["no_such_evaluator"]
    config = tmp_path / "c.json"
    config.write_text(json.dumps(broken))
    code, _, stderr = run_cli("rescore", str(path), "--config", str(config))
    assert_one_line_error(code, stderr, contains="no_such_evaluator")
    del broken["eval"]["reference_answers"]
    broken["eval"]["eval_types"] = ["string_match"]
    config.write_text(json.dumps(broken))
    code, _, stderr = run_cli("rescore", str(path), "--config", str(config))
    assert_one_line_error(code, stderr, contains="evaluator raised")


def test_diff_and_show_on_a_directory_or_missing_file_are_one_line(tmp_path: Path) -> None:
    for args in (
        ["diff", str(tmp_path), "0", "1"],
        ["show", str(tmp_path / "nope"), "0"],
        ["debug", str(tmp_path)],
    ):
        code, _, stderr = run_cli(*args)
        assert_one_line_error(code, stderr)


# -- partial sessions ---------------------------------------------------------------------------


def test_a_session_without_its_end_record_is_scored_visibly_as_partial(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    write_session(sessions / "done.session.jsonl.gz", config=string_match_config(77001))
    cut = write_session(sessions / "cut.session.jsonl.gz", config=string_match_config(77002), finished=False)
    assert not load_session(cut).complete
    code, stdout, stderr = run_cli("eval", str(sessions), "-o", str(tmp_path / "out"), "--no-progress")
    assert code == 0, stderr
    lines = {
        json.loads(line)["instance_id"]: json.loads(line)
        for line in (tmp_path / "out" / "output.jsonl").read_text().splitlines()
    }
    assert lines["cut.session.jsonl"]["test_result"]["partial"] is True
    assert lines["done.session.jsonl"]["test_result"]["partial"] is False
    assert "partial (no end record):  1 scored on their last readable step" in stdout
    assert (
        "## Partial sessions (1, scored on their last readable step)"
        in (tmp_path / "out" / "report.md").read_text()
    )
    code, stdout, stderr = run_cli(
        "eval", str(sessions), "-o", str(tmp_path / "out2"), "--no-progress", "--complete-only"
    )
    assert code == 0, stderr
    kept = [
        json.loads(line)["instance_id"]
        for line in (tmp_path / "out2" / "output.jsonl").read_text().splitlines()
    ]
    assert kept == ["done.session.jsonl"]
    assert "1 session without an end record skipped (--complete-only)" in stdout


def test_rescore_says_it_scores_the_last_readable_step(tmp_path: Path) -> None:
    cut = write_session(tmp_path / "cut.session.jsonl.gz", config=string_match_config(), finished=False)
    code, _, stderr = run_cli("rescore", str(cut))
    assert code == 0
    assert "partial session (no end record): scored its last readable step 1" in stderr


# -- redaction of oddly named password fields ------------------------------------------------------


@pytest.mark.parametrize("field", ["pass", "pw", "passwd", "pwd", "login[secret_phrase]", "p"])
def test_passwords_posted_under_any_password_input_name_are_redacted(tmp_path: Path, field: str) -> None:
    from cdp_integration.session.models import NetworkExchange, RequestInfo

    secret = "Tr0ub4dor&3-horse"
    form = f'<form><input name="user"><input type="password" name="{field}"></form>'
    path = write_session(tmp_path / "s.session.jsonl.gz", tab_html=form)
    session = load_session(path)
    posted = [
        ("application/x-www-form-urlencoded", f"user=emma&{quote_plus(field)}={quote_plus(secret)}"),
        ("application/json", json.dumps({"user": "emma", field: secret})),
        (
            "multipart/form-data; boundary=XX",
            f'--XX\r\nContent-Disposition: form-data; name="{field}"\r\n\r\n{secret}\r\n--XX--\r\n',
        ),
    ]
    exchanges = [
        NetworkExchange(
            request_id=str(i),
            tab_id="T1",
            started=0.0,
            request=RequestInfo(
                method="POST", url=f"{SITE}/login", headers={"Content-Type": kind}, post_data=body
            ),
        )
        for i, (kind, body) in enumerate(posted)
    ]
    steps = list(session.steps)
    steps[1] = steps[1].model_copy(update={"network": exchanges})
    crafted = copy.copy(session)
    object.__setattr__(crafted, "steps", tuple(steps))
    redacted = Redactor().session(crafted)
    text = orjson.dumps([s.model_dump(mode="json") for s in redacted.steps]).decode()
    assert secret not in text and json.dumps(secret)[1:-1] not in text
    # at capture time: the form page (step 0) is seen before the post (step 1)
    live = Redactor()
    live.step(steps[0])
    assert secret not in live.step(steps[1]).model_dump_json()


def test_resource_limit_helper_really_limits(tmp_path: Path) -> None:
    """The subprocess harness itself: its address-space limit holds (a 4 GB allocation fails)."""
    code = "import resource; l=3*1024**3; resource.setrlimit(resource.RLIMIT_AS,(l,l)); bytearray(4*1024**3)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0 and "MemoryError" in completed.stderr
