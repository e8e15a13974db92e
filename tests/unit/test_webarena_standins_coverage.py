"""The curated real WebArena tasks cover every evaluation feature the real configs use."""

from __future__ import annotations

import re

from tests.standins.coverage import categories, coverage_table, format_table, required_categories
from tests.standins.tasks import PLACEHOLDERS, load_curated_tasks, real_configs


def test_at_least_40_distinct_real_task_ids_each_with_two_trajectories() -> None:
    tasks = load_curated_tasks()
    configs = real_configs()
    assert len(tasks) >= 40
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.task_id in configs for t in tasks)
    assert all(t.success and t.failure and t.success != t.failure for t in tasks)


def test_every_required_category_is_covered() -> None:
    table, required = coverage_table()
    print("\n" + format_table(table, required))
    assert not sorted(c for c in required if not table.get(c)), format_table(table, required)


def test_required_categories_come_from_the_real_configs() -> None:
    """The list is computed, not typed in: every func: helper of test.raw.json is in it."""
    required = required_categories(real_configs().values())
    for helper in ("reddit_get_post_url", "shopping_get_latest_order_url"):
        assert f"program_html url:func:{helper}" in required
    for helper in (
        "gitlab_get_project_memeber_role",
        "shopping_get_sku_latest_review_author",
        "shopping_get_sku_latest_review_rating",
    ):
        assert f"program_html locator:func:{helper}" in required
    assert {"eval:string_match+url_match", "eval:url_match+program_html", "answer:fuzzy_match"} <= required


def test_categories_of_one_config() -> None:
    config = real_configs()[585]
    found = categories(config)
    assert "program_html locator:func:shopping_get_sku_latest_review_rating" in found
    assert "program_html url:last" in found and "site:shopping" in found
    assert "login on two sites" not in found


def test_trajectories_only_use_known_placeholders() -> None:
    for task in load_curated_tasks():
        for step in (*task.success, *task.failure):
            for part in step:
                for placeholder in PLACEHOLDERS:
                    part = part.replace(placeholder, "")
                assert not re.search(r"__[A-Z_]+__", part), (task.task_id, step)


def test_the_default_parity_subset_covers_every_required_category() -> None:
    from tests.standins.coverage import covering_subset

    table, required = coverage_table()
    subset = set(covering_subset())
    missing = [c for c in required if not subset.intersection(table.get(c, []))]
    assert not missing and len(subset) < len(load_curated_tasks())
