"""A synthetic evaluation output the size of a full WebArena run (812 tasks, several trials each), for
the report's scale test and benchmark: every field the report reads, with realistic variety."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

SITES = ("shopping", "shopping_admin", "gitlab", "reddit", "map", "wikipedia", "gitlab+reddit")
EVAL_TYPES = (
    "string_match",
    "url_match",
    "program_html",
    "url_match+program_html",
    "string_match+program_html",
)
CLASSES = ("answer_wrong", "state_not_reached", "state_undone", "evaluator_miss", "harness_fault")


def write_synthetic_run(directory: Path, *, tasks: int = 812, trials: int = 3, seed: int = 0) -> Path:
    """Write ``directory/output.jsonl`` with ``tasks`` x ``trials`` lines; return the file."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for task in range(tasks):
        difficulty = rng.random()
        site = SITES[task % len(SITES)]
        eval_type = EVAL_TYPES[(task // 7) % len(EVAL_TYPES)]
        for trial in range(trials):
            error = rng.random() < 0.02
            score = None if error else float(rng.random() > difficulty)
            provenance = rng.choice(("recorded",) * 8 + ("reconstructed", "imported:playwright-trace"))
            failed = not error and score == 0.0
            lines.append(
                {
                    "instance_id": f"{task}.trial{trial}",
                    "instance": {
                        "task_id": task,
                        "intent_template_id": task // 4,
                        "sites": site.split("+"),
                        "eval_types": eval_type.split("+"),
                    },
                    "history": [],
                    "test_result": {
                        "score": score,
                        "max_score": score,
                        "live_reward": score,
                        "live_max": score,
                        "answer": f"answer {task} {trial}",
                        "error": "content() on http://shop/cart missed" if error else None,
                        "error_type": "ReplayMissError" if error else None,
                        "provenance": None if error else provenance,
                        "duration_ms": 3.0,
                        "partial": False,
                        "checks": [],
                        "attribution": (
                            {"class": rng.choice(CLASSES), "reason": f"check {task} failed"}
                            if failed
                            else None
                        ),
                    },
                    "metadata": {
                        "session_path": f"trial{trial}/{task}.session.jsonl.gz",
                        "scorer": "webarena",
                    },
                }
            )
    output = directory / "output.jsonl"
    output.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return output
