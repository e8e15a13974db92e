"""Every input surface of the toolkit, derived from the code's own declarations.

- ``cdp-session``: every parameter of every command (the lazy ones loaded) whose type is a path or
  a file, or whose name says it takes a location (``..._path``, ``..._dir``, ``..._location``, a URL,
  an endpoint, an address). ``eval_infer.py`` is the ``eval`` command itself.
- ``run_infer.py``: every option of its parser (``run_infer.build_parser``) that takes a path, a
  folder, a URL or an address (its type is ``Path``, or its name or metavar says so).
- environment variables: every read (``os.environ.get``, ``os.environ[...]``, ``os.getenv``,
  ``env.get`` of a mapping named ``env``/``environ``) in the library, the harness scripts and
  ``openhands_patch``, found by walking their syntax trees. A name built in an f-string is a pattern
  (``WA_<SITE>``); a name taken from a module-level table resolves to its entries; a read whose name
  cannot be resolved must be listed in ``DYNAMIC_READS`` (with what it reads and why), so no read
  hides.

``tests/unit/test_hostile_generator.py`` checks that each surface is named by a case of the hostile
generator (``tests/hostile_gen.py``), or listed in ``NOT_ATTACKED`` with its reason.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
SOURCES = (
    REPO / "cdp_integration",
    REPO / "evaluation" / "benchmarks" / "webarena",
    REPO / "openhands_patch",
)
_LOCATION = re.compile(r"(?:^|_)(path|paths|dir|location|url|urls|endpoint|address|file|config|configs)$")
_LOCATION_META = re.compile(r"\b(FILE|DIR|URL|PATH|ADDRESS)\b")

DYNAMIC_READS: dict[str, tuple[tuple[str, ...], str]] = {
    "cdp_integration/webarena.py:use_site_urls": (
        ("SHOPPING", "WA_<SITE>"),
        "saves the site variables it sets for one scoring (SHOPPING..., WA_SHOPPING...) to restore them",
    ),
    "cdp_integration/evaluate/verified.py:_environments": (
        ("SHOPPING",),
        "the plain site variables (SHOPPING, ...) environment.prepare sets from WA_<SITE>",
    ),
    "cdp_integration/storage.py:_setting": (
        ("CDP_STORAGE_CONNECT_TIMEOUT", "CDP_STORAGE_READ_TIMEOUT", "CDP_STORAGE_RETRIES"),
        "storage's request settings, read by name",
    ),
}
"""Reads whose variable name is computed: ``module:function`` -> (the names it reads, what it is)."""

_SAVED = "saved and restored around a run or a scoring (the toolkit sets it; its old value is put back)"
_HARNESS = "read only inside run_infer.py's agent processes (OpenHands, the V1 SDK): no hostile case yet"
_SETUP = "read by environment.prepare (cdp-session setup, capture): no hostile case yet"
NOT_ATTACKED: dict[str, str] = {
    "run_infer.py --v0-episode": "written by run_infer.py itself for the one-task child it starts "
    "(argparse.SUPPRESS); never a user's input",
    "cdp-session demo output": "plays the bundled demo in Chromium (minutes): too slow for a generated case",
    **{f"env {name}": _SAVED for name in (
        "HOME", "TMPDIR", "TMUX_TMPDIR", "USER", "SU_TO_USER", "SHOPPING", "SHOPPING_ADMIN", "REDDIT",
        "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE", "ANONYMIZED_TELEMETRY", "BROWSER_USE_CLOUD_SYNC",
        "OPENHANDS_SUPPRESS_BANNER",
    )},
    **{f"env {name}": _HARNESS for name in (
        "CDP_V1_TRACE", "LLM_API_KEY", "OPENAI_API_KEY", "RAY_ADDRESS", "PYTHONPATH", "WEBARENA_CDP_INSTANCE_ID",
        "WEBARENA_CDP_LOGGING", "WEBARENA_CDP_SESSION_DIR", "WEBARENA_TRAJECTORIES", "WA_SHOPPING",
    )},
    **{f"env {name}": _SETUP for name in (
        "CDP_CHROMIUM", "CDP_CHROMIUM_HEADLESS_SHELL", "CDP_INTEGRATION_CACHE", "NLTK_DATA", "PLAYWRIGHT_BROWSERS_PATH", "XDG_CACHE_HOME",
    )},
}  # fmt: skip
"""Surfaces no hostile case attacks, each with the reason; a new surface cannot be added here
silently: the test lists this table's entries in its failure message."""


def cli_surfaces() -> set[str]:
    """``cdp-session <command> <param>`` for every location-taking parameter."""
    from cdp_integration.cli import LAZY_COMMANDS, cli

    context = click.Context(cli)
    found: set[str] = set()

    def walk(command: click.Command, name: str) -> None:
        if isinstance(command, click.Group):
            for sub in command.list_commands(context):
                child = command.get_command(context, sub)
                assert child is not None
                walk(child, f"{name} {sub}".strip())
            return
        for param in command.params:
            if isinstance(param.type, click.types.BoolParamType):
                continue
            if isinstance(param.type, click.Path | click.File) or _LOCATION.search(param.name or ""):
                found.add(f"cdp-session {name.split()[0]} {param.name}")

    assert set(LAZY_COMMANDS) <= set(cli.list_commands(context))
    walk(cli, "")
    return found


def run_infer_parser() -> argparse.ArgumentParser:
    sys.path.insert(0, str(REPO / "evaluation" / "benchmarks" / "webarena"))
    import run_infer

    return run_infer.build_parser()


def run_infer_surfaces(parser: argparse.ArgumentParser | None = None) -> set[str]:
    """``run_infer.py <option>`` for every option taking a path, folder, URL or address."""
    parser = parser or run_infer_parser()
    found: set[str] = set()
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0:
            continue
        meta = action.metavar if isinstance(action.metavar, str) else ""
        if action.type is Path or _LOCATION.search(action.dest) or _LOCATION_META.search(meta):
            found.add(f"run_infer.py {action.option_strings[0]}")
    return found


def _module_strings(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a string, or to a tuple/list/set of strings; a dict's keys under
    its name and its string values under ``name[]`` (what subscripting it gives)."""
    table: dict[str, list[str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if not isinstance(target, ast.Name) or value is None:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            table[target.id] = [value.value]
        elif isinstance(value, ast.Tuple | ast.List | ast.Set):
            table[target.id] = [
                e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
        elif isinstance(value, ast.Dict):
            values = [
                v.value for v in value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            ]
            keys = [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            table[target.id] = keys
            table[f"{target.id}[]"] = values
    return table


def _pattern(node: ast.JoinedStr) -> str:
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        else:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            parts.append(f"<{ast.unparse(inner).split('.')[0].upper()}>")
    return "".join(parts)


def _is_environ(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return text in ("os.environ", "environ", "env")


class _Reads(ast.NodeVisitor):
    def __init__(self, module: str, constants: dict[str, list[str]], imported: dict[str, list[str]]) -> None:
        self.module, self.constants, self.imported = module, constants, imported
        self.names: set[str] = set()
        self.unresolved: set[str] = set()
        self.loops: list[dict[str, list[str]]] = [{}]
        self.function = "<module>"

    def _resolve(self, node: ast.AST) -> list[str] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            return [_pattern(node)]
        if isinstance(node, ast.Name):
            for scope in reversed(self.loops):
                if node.id in scope:
                    return scope[node.id]
            return self.constants.get(node.id) or self.imported.get(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return self.constants.get(f"{node.value.id}[]")
        return None

    def _iterable(self, node: ast.AST) -> list[str] | None:
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            out: list[str] = []
            for element in node.elts:
                resolved = self._resolve(element)
                if resolved is None:
                    return None
                out += resolved
            return out
        if isinstance(node, ast.Name):
            return self._resolve(node)
        return None

    def _with_loop(self, node: ast.AST, generators: list[tuple[ast.AST, ast.AST]]) -> None:
        scope: dict[str, list[str]] = {}
        for target, iterable in generators:
            values = self._iterable(iterable)
            if isinstance(target, ast.Name) and values is not None:
                scope[target.id] = values
        self.loops.append(scope)
        self.generic_visit(node)
        self.loops.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = saved

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_For(self, node: ast.For) -> None:
        self._with_loop(node, [(node.target, node.iter)])

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self._with_loop(node, [(g.target, g.iter) for g in node.generators])

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension  # type: ignore[assignment]

    def _read(self, node: ast.AST) -> None:
        resolved = self._resolve(node)
        if resolved is None:
            self.unresolved.add(f"{self.module}:{self.function}")
        else:
            self.names.update(resolved)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            node.args
            and isinstance(func, ast.Attribute)
            and ((func.attr == "get" and _is_environ(func.value)) or ast.unparse(func) == "os.getenv")
        ):
            self._read(node.args[0])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and ast.unparse(node.value) == "os.environ":
            self._read(node.slice)
        self.generic_visit(node)


def environment_reads() -> tuple[set[str], set[str]]:
    """(variable names and patterns read, ``module:function`` of the reads not resolved)."""
    files = sorted(path for root in SOURCES for path in root.rglob("*.py"))
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    everywhere: dict[str, list[str]] = {}
    for tree in trees.values():
        for name, values in _module_strings(tree).items():
            everywhere.setdefault(name, values)
    names: set[str] = set()
    unresolved: set[str] = set()
    for path, tree in trees.items():
        module = path.relative_to(REPO).as_posix()
        reads = _Reads(module, _module_strings(tree), everywhere)
        reads.visit(tree)
        names |= reads.names
        unresolved |= reads.unresolved
    return names, unresolved


def environment_surfaces() -> set[str]:
    names, unresolved = environment_reads()
    for where in unresolved & set(DYNAMIC_READS):
        names.update(DYNAMIC_READS[where][0])
    return {f"env {name}" for name in names}


def all_surfaces() -> set[str]:
    return cli_surfaces() | run_infer_surfaces() | environment_surfaces()
