"""Crafted copies of real demo sessions, scored by the real evaluators: no code from the file runs.

Two demo episodes are played live once per module (task 10042, whose program_html targets are
``func:reddit_get_post_url('__last_url__')``, and the must_include string_match task 10004). Each
crafted copy changes one thing an attacker controls in a shared session file: the embedded config,
the final page URL (pasted by the evaluator into the expression it ``eval``s), a site URL; every
payload would create a marker file in the test's temp dir. The unmodified sessions still score like
the live run (the official helper calls still run, through the guard).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from cdp_integration.cli import cli
from cdp_integration.demo.job import DemoEpisode
from cdp_integration.demo.tasks import load_demo_tasks
from cdp_integration.errors import UntrustedConfigError
from cdp_integration.evaluate.scoring import evaluate_session, score_session_file
from cdp_integration.session.store import load_session

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def episodes(demo_corpus: list[DemoEpisode]) -> dict[int, DemoEpisode]:
    """The success episodes of tasks 10042 (program_html) and 10004 (must_include) of the shared corpus
    (read only: the tests change copies)."""
    return {e.task_id: e for e in demo_corpus if e.task_id in (10042, 10004) and e.trajectory == "success"}


def rewrite(source: Path, target: Path, change: Any) -> Path:
    """A copy of session ``source`` whose decoded records ``change(records)`` edits in place."""
    records = [orjson.loads(line) for line in gzip.decompress(source.read_bytes()).splitlines()]
    change(records)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in records)))
    return target


def payload(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def header(records: list[dict[str, Any]]) -> dict[str, Any]:
    return records[0]


def config_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    for record in reversed(records):
        task = record.get("task") or {}
        if isinstance(task.get("config"), dict):
            config: dict[str, Any] = task["config"]
            return config
    raise AssertionError("the demo session carries no config")


def demo_config(task_id: int) -> dict[str, Any]:
    return next(task.config for task in load_demo_tasks() if task.task_id == task_id)


def test_the_real_sessions_still_score_like_the_live_run(episodes: dict[int, DemoEpisode]) -> None:
    """The official helper call (reddit_get_post_url on the final URL) runs through the guard."""
    for episode in episodes.values():
        result = evaluate_session(load_session(episode.session))
        assert result.score == episode.live == 1.0, result
        assert not result.partial


@pytest.mark.parametrize("field", ["url", "locator"])
def test_func_in_the_embedded_config_never_runs(
    episodes: dict[int, DemoEpisode], tmp_path: Path, field: str
) -> None:
    marker = tmp_path / "pwned"

    def change(records: list[dict[str, Any]]) -> None:
        target = config_of(records)["eval"]["program_html"][0]
        target[field] = f"func:{payload(marker)} or 'last'" if field == "url" else f"func:{payload(marker)}"

    path = rewrite(episodes[10042].session, tmp_path / "s" / "evil.session.jsonl.gz", change)
    with pytest.raises(UntrustedConfigError, match=rf"eval\.program_html\[0\]\.{field}"):
        evaluate_session(load_session(path))
    with pytest.raises(UntrustedConfigError):
        score_session_file(path, trust_configs=True)  # trust never covers the session's own config
    result = CliRunner().invoke(cli, ["rescore", str(path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    result = CliRunner().invoke(cli, ["eval", str(path.parent), "-o", str(tmp_path / "out"), "--no-progress"])
    line = orjson.loads((tmp_path / "out" / "output.jsonl").read_bytes())
    assert line["test_result"]["error_type"] == "UntrustedConfigError"
    assert not marker.exists()


def test_a_crafted_final_url_cannot_break_out_even_with_trusted_configs(
    episodes: dict[int, DemoEpisode], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    evil = f"http://127.0.0.1:1/f/x/1/'+str({payload(marker)})+'"

    def change(records: list[dict[str, Any]]) -> None:
        steps = [r for r in records if r["type"] == "step"]
        for record in steps[-1:]:
            record["url"] = evil
            for tab in record["tabs"]:
                tab["url"] = evil
            for name in ("evaluation",):
                for call in (record.get(name) or {}).get("calls", []):
                    call["url"] = evil
                    if call["op"] == "url":
                        call["result"] = evil

    path = rewrite(episodes[10042].session, tmp_path / "s" / "evil.session.jsonl.gz", change)
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([demo_config(10042)]))
    for extra in ([], ["--trust-configs"]):
        out = tmp_path / f"out{len(extra)}"
        result = CliRunner().invoke(
            cli,
            ["eval", str(path.parent), "-o", str(out), "--configs", str(configs), "--no-progress", *extra],
        )
        assert result.exit_code == 1, result.stderr  # refused, so not scored
        line = orjson.loads((out / "output.jsonl").read_bytes())
        assert line["test_result"]["error_type"] == "UntrustedConfigError", line
    for extra in ([], ["--trust-configs"]):
        single = tmp_path / "c.json"
        single.write_text(json.dumps(demo_config(10042)))
        result = CliRunner().invoke(cli, ["rescore", str(path), "--config", str(single), *extra])
        assert result.exit_code == 2 and "eval.program_html[0].url" in result.stderr
    assert not marker.exists()


def test_a_crafted_site_url_stays_a_string(episodes: dict[int, DemoEpisode], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    session = load_session(episodes[10004].session)
    real = str(session.task["site_urls"]["SHOPPING"])
    evil = f'{real}", "url": "func:{payload(marker)}", "zz": "'

    def change(records: list[dict[str, Any]]) -> None:
        header(records)["task"]["site_urls"]["SHOPPING"] = evil

    path = rewrite(episodes[10004].session, tmp_path / "evil.session.jsonl.gz", change)
    config = demo_config(10004)
    config["eval"]["program_html"] = [
        {"url": "last", "locator": "", "required_contents": {"must_include": ["__SHOPPING__"]}}
    ]
    config["eval"]["eval_types"] = ["string_match"]
    result = evaluate_session(load_session(path), config, trust_configs=True)
    assert result.score == 1.0
    assert not marker.exists()


def test_eval_at_a_promise_that_never_settles_ends_at_the_timeout(
    episodes: dict[int, DemoEpisode], request: pytest.FixtureRequest
) -> None:
    """One line and exit 2; the offline Chromium it started does not outlive it."""
    # Short on purpose: Chromium puts a unix socket under TMPDIR, and socket paths are limited to 108 bytes.
    private_tmp = Path(tempfile.mkdtemp(prefix="cdp-evt-"))
    request.addfinalizer(lambda: shutil.rmtree(private_tmp, ignore_errors=True))
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cdp_integration.cli import main; main()",
            "eval-at",
            str(episodes[10004].session),
            "-1",
            "--js",
            "new Promise(() => {})",
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(private_tmp)},
        cwd=REPO,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "cdp-session: error: the JavaScript did not finish within 3 s (--timeout)"
    ]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _processes_using(private_tmp):
        time.sleep(1)
    assert not _processes_using(private_tmp)


def _processes_using(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(directory) in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_punkt_tab_is_found_when_nltk_and_the_evaluators_were_imported_first(
    episodes: dict[int, DemoEpisode],
) -> None:
    """A fresh interpreter that imports nltk and the evaluators before cdp_integration, without
    NLTK_DATA: the must_include task scores 1.0, and punkt_tab was not findable before."""
    code = textwrap.dedent(
        f"""
        import nltk
        import webarena.evaluation_harness.evaluators
        try:
            nltk.data.find("tokenizers/punkt_tab/english/")
            print("found-before")
        except LookupError:
            print("missing-before")
        from cdp_integration.evaluate.scoring import score_session_file
        print(score_session_file({str(episodes[10004].session)!r})["score"])
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    for site in ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE"):
        env.setdefault(site, "http://127.0.0.1:9")
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=REPO
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split() == ["missing-before", "1.0"]
