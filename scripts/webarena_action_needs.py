"""Which of WebArena's 812 official tasks need a step beyond click/type/navigate, and whether the V1
tool set (openhands-tools' browser tools + ``browser_select_option`` / ``browser_press_key``) has it.

Neither WebArena's ``test.raw.json`` nor WebArena-Verified names the actions a task takes. What they
do name is the state a solution leaves behind, and that points at the form controls set:

- WebArena-Verified's ``NetworkEventEvaluator``: the request the UI must send (query parameters and
  form fields, e.g. ``filters[status]``, ``access_level``, ``submission[forum]``);
- WebArena's ``reference_url`` and ``program_html`` URLs (query parameters such as
  ``product_list_order``) and ``program_html`` locators (the element read, e.g.
  ``select.routing_engines``, ``[name="product[color]"]``);
- the intent, for map directions by travel mode (the mode is a ``<select>`` on the directions form).

Each field is mapped to the kind of control that produces it on the real sites (Magento, GitLab,
Postmill, OpenStreetMap; ``FIELD_KINDS``, our reading of their forms), and each kind to the V1 tool
that operates it (``TOOL_FOR_KIND``). A task counts once per kind. The counts are a lower bound of
what a real agent may choose to do (it can always press Enter or scroll); they are the steps the
checked state cannot be reached without.

    .venv/bin/python scripts/webarena_action_needs.py [--list KIND]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from importlib import resources
from typing import Any

FIELD_KINDS: dict[str, str] = {
    # drop-downs (<select>, or a menu of options)
    "product_list_order": "select",  # shop: "Sort By"
    "sort": "select",  # GitLab issue/MR list sort menu
    "filters[status]": "select",  # Magento admin grid filter
    "report_type": "select",  # Magento sales report: "Order Status"/"Date Used"
    "period_type": "select",
    "show_order_statuses": "select",
    "order_statuses": "select",
    "country_id": "select",  # shop address book
    "region_id": "select",
    "product[color]": "select",
    "product[size]": "select",
    "product[quantity_and_stock_status][is_in_stock]": "select",
    "store_id": "select",  # CMS page "Store View" (multi-select)
    "website_ids": "select",  # cart price rule (multi-select)
    "customer_group_ids": "select",
    "simple_action": "select",
    "status_id": "select",  # review status
    "access_level": "select",  # GitLab member role
    "availability": "toggle",  # GitLab status: the "busy" checkbox
    "clear_status_after": "select",
    "submission[forum]": "select",  # Postmill forum of a submission
    "project[namespace_id]": "select",  # GitLab project namespace
    "select.routing_engines": "select",  # OpenStreetMap directions: travel mode
    # a search box: typed, then submitted with Enter (or its button)
    "q": "submit_search",
    "query": "submit_search",
    "search": "submit_search",
    # type-ahead pickers: type a name, then choose from the list that appears
    "user_id": "type_ahead",  # GitLab invite members
    "assignee_ids": "type_ahead",
    "reviewer_ids": "type_ahead",
    "assignee_username": "type_ahead",
    "reviewer_username": "type_ahead",
    "label_name[]": "type_ahead",
    # dates, typed into the field (or picked from a calendar)
    "due_date": "date",
    "start_date": "date",
    "sales_report_from": "date",
    "sales_report_to": "date",
    "from": "date",
    "to": "date",
    # radio buttons, checkboxes, switches
    "visibility_level": "toggle",
    "visibility": "toggle",
    "submission[mediaType]": "toggle",
    "is_active": "toggle",
    "initialize_with_readme": "toggle",
    "product[status]": "toggle",
    # a file chosen from disk
    "file": "upload",
    "image": "upload",
}
"""Request field / query parameter / locator -> the kind of control that sets it on the real sites."""

TOOL_FOR_KIND: dict[str, str | None] = {
    "select": "browser_select_option (native <select> and ARIA menus), or browser_click on a menu's items",
    "submit_search": "browser_type then browser_press_key('Enter') (or browser_click on the search button)",
    "type_ahead": "browser_type, then browser_click on the suggestion (or browser_press_key('Enter'))",
    "date": "browser_type into the date field",
    "toggle": "browser_click",
    "upload": None,  # no V1 tool sets a file input
    "hover": None,
}
"""What operates each kind of control in the V1 tool set (None: no tool does)."""

_TRAVEL_MODE = re.compile(r"\b(walk|walking|driv\w*|bik\w*|cycl\w*|bicycl\w*)\b", re.I)


def _field_name(key: str) -> list[str]:
    """The names a request field or query key is known by: itself and its bracket-free forms."""
    key = key.replace("%5B", "[").replace("%5D", "]")
    names = [key]
    if "[" in key:
        names += re.findall(r"\[([^\]]+)\]", key)  # project[visibility_level] -> visibility_level
        names.append(re.sub(r"\[\d*\]$", "", key))  # store_id[0] -> store_id
    return names


def _kinds_of(fields: list[str]) -> set[str]:
    kinds = set()
    for field in fields:
        for name in _field_name(field):
            if name in FIELD_KINDS:
                kinds.add(FIELD_KINDS[name])
                break
    return kinds


def _query_keys(url: str) -> list[str]:
    keys = []
    for part in url.split(" |OR| "):
        if "?" in part:
            keys += [item.split("=", 1)[0] for item in part.split("?", 1)[1].split("&") if item]
    return keys


def needs_of(config: dict[str, Any], verified: dict[str, Any] | None) -> dict[str, list[str]]:
    """``{kind: [evidence, ...]}`` for one task."""
    found: dict[str, list[str]] = defaultdict(list)

    def note(fields: list[str], where: str) -> None:
        for field in fields:
            for kind in _kinds_of([field]):
                found[kind].append(f"{where}: {field}")

    evaluation = config.get("eval") or {}
    note(_query_keys(evaluation.get("reference_url") or ""), "reference_url")
    for program in evaluation.get("program_html") or ():
        note(_query_keys(program.get("url") or ""), "program_html url")
        locator = program.get("locator") or ""
        note(re.findall(r"""name=\\?["']([^"'\\]+)""", locator), "program_html locator")
        note(re.findall(r"""id=\\?["']([^"'\\]+)""", locator), "program_html locator")
        if "select.routing_engines" in locator:
            note(["select.routing_engines"], "program_html locator")
    for check in (verified or {}).get("eval") or ():
        if check.get("evaluator") != "NetworkEventEvaluator":
            continue
        expected = check.get("expected") or {}
        note(list((expected.get("query_params") or {}).keys()), "Verified request query")
        post = expected.get("post_data")
        if isinstance(post, dict):
            note([key.removeprefix("$.").split(".")[-1] for key in post], "Verified request body")
    if "map" in (config.get("sites") or ()) and _TRAVEL_MODE.search(str(config.get("intent", ""))):
        note(["select.routing_engines"], "intent (travel mode)")
    return dict(found)


def load() -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """WebArena's 812 configs (the ``webarena`` package's ``test.raw.json``) and Verified's dataset."""
    configs = json.loads(resources.files("webarena").joinpath("test.raw.json").read_text())
    dataset = resources.files("webarena_verified").joinpath("assets/dataset/webarena-verified.json")
    verified = {int(task["task_id"]): task for task in json.loads(dataset.read_text())}
    return configs, verified


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", metavar="KIND", help="print the task ids of one kind with the evidence")
    args = parser.parse_args(argv)
    configs, verified = load()
    by_kind: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for config in configs:
        task_id = int(config["task_id"])
        for kind, evidence in needs_of(config, verified.get(task_id)).items():
            by_kind[kind][task_id] = evidence
    if args.list:
        for task_id, evidence in sorted(by_kind.get(args.list, {}).items()):
            print(task_id, "; ".join(sorted(set(evidence))))
        return 0
    print(f"{len(configs)} WebArena task configs ({len(verified)} in WebArena-Verified)")
    for kind in TOOL_FOR_KIND:
        ids = sorted(by_kind.get(kind, {}))
        sample = " ".join(map(str, ids[:8])) + (" ..." if len(ids) > 8 else "")
        tool = TOOL_FOR_KIND[kind] or "NO V1 TOOL"
        print(f"  {kind:14} {len(ids):4} tasks  [{sample}]  -> {tool}")
    select_or_press = set(by_kind.get("select", {})) | set(by_kind.get("submit_search", {}))
    print(f"  select or a submitted search: {len(select_or_press)} tasks")
    uncovered = sorted(
        {t for kind, tool in TOOL_FOR_KIND.items() if tool is None for t in by_kind.get(kind, {})}
    )
    print(f"  needing a kind no V1 tool operates: {len(uncovered)} {uncovered[:20]}")
    return 1 if uncovered else 0


if __name__ == "__main__":
    sys.exit(main())
