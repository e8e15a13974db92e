"""Everything WebArena-specific the official evaluator needs: placeholders, site globals, its config
file, ``func:`` vetting, its fixed sleeps and the judge's API key.

Every place that turns a WebArena config into something the official evaluator runs goes through
this module, because a config is code: libwebarena's ``HTMLContentEvaluator`` ``eval()``s the text
after ``func:`` in a ``program_html`` target's ``url`` (after pasting ``page.url`` over
``__last_url__``) and ``locator`` (``__page__`` -> ``page``). A config embedded in a session file,
a site URL recorded in one and the final page URL of an episode all come from the file, so:

- placeholders (``__SHOPPING__`` ...) are substituted in parsed string values, never in JSON text,
  so a crafted site URL cannot add keys;
- ``vet_config`` allows a ``func:`` string only when, after the evaluator's own substitution with
  every URL the replayed page can return, it parses as exactly one call of an official helper in
  one of the forms WebArena's ``test.raw.json`` uses, with literal arguments (``page`` where the
  official form passes ``__page__``); anything else is an ``UntrustedConfigError`` naming the field;
- ``guard_evaluator_eval`` replaces the name ``eval`` inside the evaluator module for the block, so
  what actually reaches it is checked again and the helper is called directly, without ``eval``;
- configs the user wrote may be trusted (``trusted=True``): any expression then runs, but a URL
  pasted into ``__last_url__`` must still leave the expression's syntax tree unchanged;
- the temporary config file the evaluator reads is named by this module, never by the config.

A bottom-layer module: the logger's live end-of-episode probe (capture) and offline scoring
(evaluate) both use it. Nothing here edits or copies evaluator code; ``HTMLContentEvaluator`` waits
``time.sleep(3)`` after each navigation, and ``skip_evaluator_sleep`` gives its module a ``time``
whose ``sleep`` returns at once.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdp_integration.environment import WEBARENA_SITES
from cdp_integration.errors import EvaluationError, UntrustedConfigError

__all__ = [
    "OFFICIAL_HELPERS",
    "PLACEHOLDERS",
    "guard_evaluator_eval",
    "offline_api_key",
    "point_evaluator_globals",
    "skip_evaluator_sleep",
    "substitute_placeholders",
    "use_site_urls",
    "vet_config",
    "webarena_config_file",
]

PLACEHOLDERS: dict[str, str] = {f"__{site}__": site for site in WEBARENA_SITES}
"""URL placeholder in a WebArena config -> the site it stands for (``__SHOPPING__`` -> ``SHOPPING``)."""

OFFICIAL_HELPERS: dict[str, dict[str, tuple[str, ...]]] = {
    "url": {
        "shopping_get_latest_order_url": (),
        "reddit_get_post_url": ("str",),
    },
    "locator": {
        "gitlab_get_project_memeber_role": ("page", "str"),
        "shopping_get_sku_latest_review_author": ("str",),
        "shopping_get_sku_latest_review_rating": ("str",),
    },
}
"""The ``func:`` calls WebArena's ``test.raw.json`` makes, per field: helper name -> argument kinds
(``str``: a string literal; ``page``: the name the evaluator substitutes for ``__page__``)."""

_LAST_URL = "__last_url__"
_SENTINEL_URL = "http://localhost/"
_URL_MODULES = ("webarena.browser_env.env_config", "webarena.evaluation_harness.helper_functions")
_EVALUATORS_MODULE = "webarena.evaluation_harness.evaluators"


def substitute_placeholders(value: Any, urls: Mapping[str, str], *, where: str = "the config") -> Any:
    """A copy of ``value`` with site placeholders replaced inside its strings by ``urls[site]``.

    Keys are kept as they are. A placeholder whose site is missing from ``urls`` is an
    ``EvaluationError``.
    """
    if isinstance(value, str):
        for placeholder, site in PLACEHOLDERS.items():
            if placeholder in value:
                if site not in urls:
                    raise EvaluationError(f"{where} uses {placeholder} but no {site} URL is known")
                value = value.replace(placeholder, urls[site])
        return value
    if isinstance(value, Mapping):
        return {key: substitute_placeholders(item, urls, where=where) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [substitute_placeholders(item, urls, where=where) for item in value]
    return value


# -- func: vetting -------------------------------------------------------------------------------


def _helper_call(expression: str, field: str) -> tuple[str, list[Any]] | None:
    """``(helper, args)`` when ``expression`` is one official helper call for ``field``; else None.

    ``args`` holds the literal values, with ``None`` where the page goes.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        return None
    kinds = OFFICIAL_HELPERS[field].get(call.func.id)
    if kinds is None or len(kinds) != len(call.args):
        return None
    args: list[Any] = []
    for kind, arg in zip(kinds, call.args, strict=True):
        if kind == "page" and isinstance(arg, ast.Name) and arg.id == "page":
            args.append(None)
        elif kind == "str" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            args.append(arg.value)
        else:
            return None
    return call.func.id, args


def _shape(expression: str) -> str | None:
    """The syntax tree of ``expression`` with every string literal blanked (None if it does not parse)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree, annotate_fields=False)


def _func_body(value: str) -> str:
    """What the evaluator evaluates of a ``func:`` field, before its substitutions (its own split)."""
    return value.split("func:")[1]


@dataclass(frozen=True)
class _FuncField:
    where: str
    field: str
    """``url`` or ``locator``."""
    body: str


def _func_fields(config: Mapping[str, Any]) -> list[_FuncField]:
    """Every ``program_html`` url/locator the evaluator would hand to ``eval``."""
    evaluation = config.get("eval")
    targets = evaluation.get("program_html") if isinstance(evaluation, Mapping) else None
    found: list[_FuncField] = []
    for index, target in enumerate(targets if isinstance(targets, list) else []):
        if not isinstance(target, Mapping):
            continue
        for field, prefix in (("url", "func"), ("locator", "func:")):
            value = target.get(field)
            where = f"eval.program_html[{index}].{field}"
            if isinstance(value, str) and value.startswith(prefix):
                if "func:" not in value:
                    raise UntrustedConfigError(f"{where}: {value[:80]!r} is not a func: call")
                found.append(_FuncField(where, field, _func_body(value)))
    return found


def _evaluated(field: _FuncField, url: str) -> str:
    """The string the evaluator passes to ``eval`` for ``field`` when the page is at ``url``."""
    if field.field == "url":
        return field.body.replace(_LAST_URL, url)
    return field.body.replace("__page__", "page")


def vet_config(config: Mapping[str, Any], *, page_urls: Iterable[str] = (), trusted: bool = False) -> None:
    """Refuse a config whose ``func:`` fields could run code other than an official helper call.

    ``page_urls``: every URL the evaluated page may report (pasted over ``__last_url__``).
    ``trusted``: the user wrote this config; any expression is allowed, but a pasted URL must not
    change its syntax tree. Raises ``UntrustedConfigError`` naming the field.
    """
    urls = [_SENTINEL_URL, *dict.fromkeys(page_urls)]
    for field in _func_fields(config):
        if trusted:
            if field.field != "url" or _LAST_URL not in field.body:
                continue
            shape = _shape(_evaluated(field, _SENTINEL_URL))
            if shape is None:
                raise UntrustedConfigError(f"{field.where}: func: expression does not parse")
            for url in urls:
                if _shape(_evaluated(field, url)) != shape:
                    raise UntrustedConfigError(
                        f"{field.where}: the page URL {url[:80]!r} would change the func: expression"
                    )
            continue
        for url in urls if field.field == "url" else urls[:1]:
            if _helper_call(_evaluated(field, url), field.field) is None:
                shown = _evaluated(field, url)
                raise UntrustedConfigError(
                    f"{field.where}: {shown[:100]!r} is not one of the official WebArena helper calls "
                    f"({', '.join(sorted(OFFICIAL_HELPERS[field.field]))}) with literal arguments; "
                    "pass --trust-configs (trust_configs=True) only for a config you wrote"
                )


# -- the eval site -------------------------------------------------------------------------------


class _EvalGuard:
    """Stands in for ``eval`` inside the evaluator module: checks, then calls the helper itself."""

    def __init__(self, config: Mapping[str, Any], trusted: bool) -> None:
        self.fields = _func_fields(config)
        self.trusted = trusted

    def _trusted_field(self, expression: str) -> _FuncField | None:
        for field in self.fields:
            if field.field == "locator" or _LAST_URL not in field.body:
                if _evaluated(field, "") == expression:
                    return field
                continue
            pieces = [re.escape(piece) for piece in field.body.split(_LAST_URL)]
            pattern = "(?P<u>.*)".join(pieces[:2]) + "".join("(?P=u)" + p for p in pieces[2:])
            match = re.fullmatch(pattern, expression, re.DOTALL)
            if match and _shape(expression) == _shape(_evaluated(field, _SENTINEL_URL)) is not None:
                return field
        return None

    def __call__(self, expression: Any, *rest: Any) -> Any:
        caller = sys._getframe(1)
        if not isinstance(expression, str) or rest:
            raise UntrustedConfigError("the evaluator evaluated something other than a func: string")
        if self.trusted:
            if self._trusted_field(expression) is None:
                raise UntrustedConfigError(
                    f"func: expression {expression[:100]!r} is not the vetted config's (page URL breaks out?)"
                )
            return builtins.eval(expression, caller.f_globals, caller.f_locals)
        for field in ("url", "locator"):
            call = _helper_call(expression, field)
            if call is not None:
                name, args = call
                helper = caller.f_globals[name]
                page = caller.f_locals.get("page")
                return helper(*(page if arg is None else arg for arg in args))
        raise UntrustedConfigError(
            f"func: expression {expression[:100]!r} is not an official WebArena helper call; not run"
        )


@contextlib.contextmanager
def guard_evaluator_eval(config: Mapping[str, Any], *, trusted: bool = False) -> Iterator[None]:
    """Within the block, the evaluator module's ``eval`` only runs vetted ``func:`` calls of ``config``."""
    import webarena.evaluation_harness.evaluators as evaluators

    module: types.ModuleType = evaluators
    had = "eval" in vars(module)
    previous = vars(module).get("eval")
    module.eval = _EvalGuard(config, trusted)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if had:
            module.eval = previous  # type: ignore[attr-defined]
        else:
            del module.eval  # type: ignore[attr-defined]


# -- site globals and the config file ---------------------------------------------------------


def point_evaluator_globals(urls: Mapping[str, str]) -> list[tuple[types.ModuleType, str, object]]:
    """Set the already-imported evaluator modules' site globals to ``urls``; the previous values."""
    wanted = {name.upper(): url for name, url in urls.items() if name.upper() in WEBARENA_SITES}
    saved: list[tuple[types.ModuleType, str, object]] = []
    for module_name in _URL_MODULES:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for site, url in wanted.items():
            if hasattr(module, site):
                saved.append((module, site, getattr(module, site)))
                setattr(module, site, url)
    return saved


@contextlib.contextmanager
def use_site_urls(urls: Mapping[str, str]) -> Iterator[None]:
    """Point the evaluator's site globals (``SHOPPING``, ...) and variables at ``urls`` for the block.

    ``urls`` maps site names, in either spelling (``SHOPPING`` or ``shopping``), to base URLs;
    sites not given keep their current value.
    """
    import webarena.evaluation_harness.helper_functions  # noqa: F401 - reads the variables at first import

    wanted = {name.upper(): url for name, url in urls.items() if name.upper() in WEBARENA_SITES}
    saved_env = {key: os.environ.get(key) for site in wanted for key in (site, f"WA_{site}")}
    for site, url in wanted.items():
        os.environ[site] = os.environ[f"WA_{site}"] = url
    saved_globals = point_evaluator_globals(wanted)
    try:
        yield
    finally:
        for module, site, value in reversed(saved_globals):
            setattr(module, site, value)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def webarena_config_file(config: Mapping[str, Any]) -> Iterator[str]:
    """The evaluators take a config *file*: ``config`` written to a temporary one for the block.

    Its name is never taken from the config, so a ``task_id`` like ``../../x`` cannot place it
    elsewhere. On Linux it is an anonymous in-memory file (``memfd``) the evaluator opens by its
    ``/proc/self/fd`` path: nothing touches the disk and nothing is left behind, and a batch of
    thousands of sessions does not pay a directory made and removed per scored step. Elsewhere it
    is ``config.json`` in a fresh private directory.
    """
    text = json.dumps(config)
    fd = _memory_file(text.encode())
    if fd is None:
        with tempfile.TemporaryDirectory(prefix="cdp-eval-") as folder:
            path = Path(folder) / "config.json"
            path.write_text(text)
            yield str(path)
        return
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _memory_file(data: bytes) -> int | None:
    """A ``memfd`` holding ``data`` that opens again by its ``/proc/self/fd`` path; None where the
    system has none (or no ``/proc``)."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd: int = create("cdp-eval-config", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if not os.path.exists(f"/proc/self/fd/{fd}"):  # no /proc: the evaluator could not open it
            raise OSError("no /proc/self/fd")
    except OSError:
        os.close(fd)
        return None
    return fd


# -- the evaluator's fixed sleeps and the judge's key --------------------------------------------


@contextlib.contextmanager
def skip_evaluator_sleep() -> Iterator[None]:
    """Within the block, ``HTMLContentEvaluator``'s fixed 3 s waits return immediately.

    Offline there is nothing to wait for; live, use it only where pages are loaded when ``goto``
    returns (the in-process demo site).
    """
    import webarena.evaluation_harness.evaluators as evaluators

    quick = types.SimpleNamespace(
        **{name: getattr(time, name) for name in dir(time) if not name.startswith("__")}
    )
    quick.sleep = lambda seconds: None
    original = evaluators.time
    evaluators.time = quick  # type: ignore[assignment]
    try:
        yield
    finally:
        evaluators.time = original


@contextlib.contextmanager
def offline_api_key() -> Iterator[None]:
    """An ``OPENAI_API_KEY`` placeholder for the block when none is set.

    The LLM judge's client refuses to start without a key even when every call it makes is answered
    from a recording; the placeholder never leaves the process (replay intercepts the transport).
    """
    if os.environ.get("OPENAI_API_KEY"):
        yield
        return
    os.environ["OPENAI_API_KEY"] = "cdp-integration-offline-replay"
    try:
        yield
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
