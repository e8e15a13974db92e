"""Regenerate the golden session files in ``tests/fixtures/sessions/v<FORMAT_VERSION>/``.

A few demo tasks, both scripted trajectories, played live in BrowserGym against the demo shop with
capture on (the same path as ``make demo``), covering each evaluator family: string_match exact,
must_include and fuzzy_match (the LLM judge), url_match, program_html (signed in; and through the
evaluator's own REST sign-in), url_match + program_html (held mid-episode, undone at the end).
``expected.json`` holds each episode's live reward and best per-step reward as BrowserGym reported them.

Earlier format versions' directories are left alone: they are the proof that older files still load
and score. Run after a format change (then commit the new directory):

    .venv/bin/python scripts/make_fixtures.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_TASKS = (10000, 10005, 10010, 10014, 10024, 10027, 10039)


def main() -> None:
    sys.path.insert(0, str(REPO))
    from cdp_integration.demo.job import capture_demo_tasks
    from cdp_integration.session.models import FORMAT_VERSION

    target = REPO / "tests" / "fixtures" / "sessions" / f"v{FORMAT_VERSION}"
    with tempfile.TemporaryDirectory(prefix="cdp-fixtures-") as scratch:
        episodes = capture_demo_tasks(Path(scratch) / "sessions", task_ids=FIXTURE_TASKS)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        expected = {}
        for episode in episodes:
            shutil.copyfile(episode.session, target / episode.session.name)
            expected[episode.session.name] = {
                "task_id": episode.task_id,
                "trajectory": episode.trajectory,
                "eval_types": list(episode.eval_types),
                "live": episode.live,
                "live_max": episode.live_max,
            }
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    size = sum(path.stat().st_size for path in target.iterdir())
    print(f"{len(episodes)} golden sessions in {target.relative_to(REPO)} ({size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
