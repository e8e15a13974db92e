"""Which WebArena evaluation features the curated tasks exercise, computed from their real configs.

``python -m tests.standins.coverage`` prints the table; the unit test asserts every category is covered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tests.standins.tasks import load_curated_tasks, real_configs

SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "wikipedia", "map")
LOGIN_SITES = frozenset({"shopping", "shopping_admin", "reddit", "gitlab"})
"""Sites BrowserGym's ``ui_login`` signs in to (wikipedia and map only open the start page)."""
_FUNC = re.compile(r"func:(\w+)\(")


def categories(config: Mapping[str, Any]) -> set[str]:
    """The features one task config exercises."""
    found = {f"site:{site}" for site in config["sites"]}
    evaluation = config["eval"]
    found.add("eval:" + "+".join(evaluation["eval_types"]))
    for kind, value in (evaluation.get("reference_answers") or {}).items():
        found.add(f"answer:{kind}")
        if kind == "fuzzy_match" and value == "N/A":
            found.add("answer:fuzzy_match N/A (ua_match)")
    if "url_match" in evaluation["eval_types"]:
        found.add("url_match:" + evaluation.get("url_note", "GOLD in PRED"))
    for target in evaluation.get("program_html") or []:
        url, locator = target["url"], target["locator"]
        if url == "last":
            found.add("program_html url:last")
        elif url.startswith("func:"):
            found.update(f"program_html url:func:{name}" for name in _FUNC.findall(url))
        else:
            found.add("program_html url:other")
        if not locator.strip():
            found.add("program_html locator:page content")
        elif locator.startswith("func:"):
            found.update(f"program_html locator:func:{name}" for name in _FUNC.findall(locator))
        else:
            found.add("program_html locator:js")
        if "prep_actions" in target:
            found.add("program_html prep_actions")
        found.update(f"program_html required:{kind}" for kind in target["required_contents"])
    if len(LOGIN_SITES.intersection(config["sites"])) >= 2:
        found.add("login on two sites")
    if len(config["sites"]) >= 2:
        found.add("two sites")
    if " |AND| " in config.get("start_url", ""):
        found.add("several start tabs")
    return found


def required_categories(all_configs: Iterable[Mapping[str, Any]]) -> set[str]:
    """What the selection must cover: every site, eval combination, answer kind and ``func:`` helper form
    that occurs in the real configs, plus url:last/other, prep_actions and a two-login task."""
    occurring = set().union(*(categories(c) for c in all_configs))
    wanted = {f"site:{site}" for site in SITES} | {"login on two sites", "program_html prep_actions"}
    prefixes = (
        "eval:",
        "answer:",
        "url_match:",
        "program_html url:",
        "program_html locator:",
        "program_html required:",
    )
    return wanted | {c for c in occurring if c.startswith(prefixes)}


def coverage_table() -> tuple[dict[str, list[int]], set[str]]:
    """Category -> curated task ids exercising it, and the required categories."""
    configs = real_configs()
    table: dict[str, list[int]] = {}
    for task in load_curated_tasks():
        for category in categories(configs[task.task_id]):
            table.setdefault(category, []).append(task.task_id)
    return table, required_categories(configs.values())


def covering_subset() -> list[int]:
    """A small set of curated task ids that still covers every required category (greedy set cover,
    ties to the lower id): what ``make test`` plays by default; ``CDP_TEST_WEBARENA_TASKS=all`` plays all."""
    table, required = coverage_table()
    by_task: dict[int, set[str]] = {}
    for category, ids in table.items():
        if category in required:
            for task_id in ids:
                by_task.setdefault(task_id, set()).add(category)
    uncovered, chosen = set(required).intersection(table), []
    while uncovered:
        best = min(by_task, key=lambda task_id: (-len(by_task[task_id] & uncovered), task_id))
        chosen.append(best)
        uncovered -= by_task[best]
    return sorted(chosen)


def format_table(table: Mapping[str, list[int]], required: set[str]) -> str:
    lines = [f"{'category':<52} {'tasks':>5}  ids"]
    for category in sorted(required | set(table)):
        ids = table.get(category, [])
        mark = "" if ids or category not in required else "  MISSING"
        lines.append(f"{category:<52} {len(ids):>5}  {' '.join(map(str, ids))}{mark}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(*coverage_table()))
