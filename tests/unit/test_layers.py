"""The package's layers import only downward, and ``import cdp_integration`` stays light.

The import graph is read from the source (every ``import`` statement, at module level, inside
functions and under ``TYPE_CHECKING``, plus string constants naming a module, as ``importlib`` and
the lazy ``__getattr__`` tables use them), so a lazy import cannot hide an upward dependency.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cdp_integration"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "_version",
        "_lazy",
        "environment",
        "interception",
        "webarena",
        "deployment",
    ),
    ("session",),
    ("storage", "pool", "cluster"),
    ("har",),
    ("imports",),
    ("replay",),
    ("capture",),
    ("evaluate",),
    ("debug",),
    ("integrations",),
    ("cli", "evaluate.command", "debug.commands", "imports.command", ""),
)
"""Bottom first. A name is a module or subpackage under ``cdp_integration`` (``""``: the root
package, a facade over every layer). The ``*.command(s)`` modules are the command layer, wherever
they live. ``webarena`` (placeholders, site globals, the evaluator's config file and
settings) is bottom-layer because capture's end probe needs it too.
``storage``, ``pool`` and ``cluster`` (object storage, deployment pools, Ray) read what they fetch
through ``session.untrusted``. ``imports`` (other tools' recordings -> sessions) needs only the format below it; evaluate and the
commands use it. ``demo`` is in no layer: the library never imports it. ``integrations`` (capture of agent
frameworks such as browser-use) sits on the whole library and nothing below imports it."""

COMMAND_LAYER = LAYERS[-1]
HEAVY = ("playwright", "browsergym", "webarena", "webarena_verified", "openhands", "gymnasium")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    in_function: bool


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _target(name: str) -> str:
    """The module an imported dotted name refers to: the longest prefix that is a module here."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str) -> list[Edge]:
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    edges: list[Edge] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            names = [node.value]
        for name in names:
            if name.startswith("cdp_integration.") or name == "cdp_integration":
                edges.append(Edge(module, _target(name), getattr(node, "lineno", 0), in_function))
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return edges


def _layer(module: str) -> int | None:
    """Index in ``LAYERS`` (the most specific entry wins); ``None`` for ``demo``."""
    name = module.removeprefix("cdp_integration").removeprefix(".")
    if name == "demo" or name.startswith("demo."):
        return None
    best: tuple[int, int] | None = None
    for index, layer in enumerate(LAYERS):
        for entry in layer:
            matches = name == entry or (entry and name.startswith(entry + "."))
            if matches and (best is None or len(entry) > best[1]):
                best = (index, len(entry))
    if best is None:
        pytest.fail(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}")
    return best[0]


GRAPH = [edge for module in MODULES for edge in _imports(module)]


def test_the_graph_is_read_from_the_source() -> None:
    """Guards the reader itself: known edges of each kind are found."""
    found = {(e.source, e.target, e.in_function) for e in GRAPH}
    assert ("cdp_integration.replay.page", "cdp_integration.session.models", False) in found
    assert ("cdp_integration.cli", "cdp_integration.demo.job", True) in found  # inside the command
    assert (
        "cdp_integration.evaluate.session_line",
        "cdp_integration.evaluate.scoring",
        False,
    ) in found  # a string
    assert len({e.source for e in GRAPH}) > 40


def test_every_import_goes_down_the_layers() -> None:
    upward = [
        f"{e.source} (layer {_layer(e.source)}) imports {e.target} (layer {_layer(e.target)}) at line {e.line}"
        for e in GRAPH
        if _layer(e.source) is not None
        and _layer(e.target) is not None
        and _layer(e.target) > _layer(e.source)  # type: ignore[operator]
    ]
    assert upward == []


SCRIPTS = PACKAGE.parent / "evaluation" / "benchmarks" / "webarena"


def _script_imports() -> set[tuple[str, str]]:
    """(script, script) edges between the WebArena entry scripts' own modules (they import each
    other by bare name, from their folder), wherever the import statement is."""
    names = {path.stem for path in SCRIPTS.glob("*.py")}
    edges = set()
    for path in SCRIPTS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            edges |= {(path.stem, target) for target in targets if target in names and target != path.stem}
    return edges


def test_no_two_modules_import_each_other() -> None:
    """Each pair of modules depends one way (shared pieces live in a module both import), among the
    evaluation modules and the WebArena scripts, lazy imports included: ``batch`` uses ``ray_scoring``,
    both score through ``session_line``; ``run_infer`` uses ``pool_runner``, which gets its parsed
    arguments."""
    evaluate = {(e.source, e.target) for e in GRAPH if e.source.startswith("cdp_integration.evaluate.")}
    edges = {(a, b) for a, b in evaluate if b.startswith("cdp_integration.evaluate.") and a != b}
    edges |= _script_imports()
    mutual = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert ("pool_runner", "scheduler") in edges  # the script reader sees their imports
    assert mutual == []


def test_the_library_never_imports_the_demo() -> None:
    """Only the ``demo`` command, inside its function, reaches into ``cdp_integration.demo``."""
    into_demo = [
        f"{e.source} line {e.line}"
        for e in GRAPH
        if _layer(e.target) is None
        and _layer(e.source) is not None
        and not (e.source == "cdp_integration.cli" and e.in_function)
    ]
    assert into_demo == []


def test_click_is_imported_by_the_command_layer_only() -> None:
    users = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            imported = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name == "click" or name.startswith("click.") for name in imported):
                users.add(module)
    assert users, "the reader found no click import at all"
    assert {m for m in users if _layer(m) is not None and _layer(m) != len(LAYERS) - 1} == set()


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.split()


@pytest.mark.parametrize(
    "statement",
    [
        "import cdp_integration",
        "import cdp_integration.errors",
        "from cdp_integration.cli import cli",
        "from cdp_integration.session import load_session",
    ],
)
def test_light_imports_load_no_browser_or_evaluator(statement: str) -> None:
    loaded = _loaded_after(statement)
    assert "cdp_integration" in loaded
    assert [name for name in HEAVY if name in loaded] == []


def test_the_probe_sees_heavy_imports() -> None:
    """The check above can fail: using a replay name loads Playwright."""
    assert "playwright" in _loaded_after("import cdp_integration\ncdp_integration.MockPage")


# -- outside input goes through one reader -------------------------------------------------------

READER = "cdp_integration.session.untrusted"
"""The one module that opens, unzips, unpickles and parses files from outside (``untrusted.py``)."""
RAW_MODULES = frozenset({"zipfile", "gzip", "pickle", "tarfile", "shelve", "marshal", "bz2", "lzma"})
RAW_CALLS = frozenset(
    {
        "open", "os.open", "os.fdopen", "io.open", "gzip.open", "zipfile.ZipFile", "tarfile.open",
        "pickle.load", "pickle.loads", "pickle.Unpickler", "json.load", "json.loads", "orjson.loads",
        ".read_bytes", ".read_text", ".write_bytes", ".write_text",
    }
)  # fmt: skip
ALLOWED_RAW: dict[tuple[str, str], str] = {
    ("cdp_integration.debug.viewer", ".read_text"): "the viewer's own HTML template (package data)",
    (
        "cdp_integration.deployment",
        ".read_text",
    ): "webarena's and webarena_verified's task lists (package data)",
    (
        "cdp_integration.deployment",
        "json.loads",
    ): "webarena's and webarena_verified's task lists (package data)",
    ("cdp_integration.environment", ".read_text"): "Playwright's browsers.json and /proc of our own children",
    ("cdp_integration.environment", ".read_bytes"): "/proc/<pid>/cmdline of our own children",
    ("cdp_integration.replay.offline", "open"): "/proc/<pid>/stat and cmdline of our own sandbox browser",
    ("cdp_integration.capture.cdp_attach", ".read_text"): "the DevTools port file our own Chromium writes",
    (
        "cdp_integration.capture.probes",
        "orjson.loads",
    ): "a round trip of our own value through JSON (no file)",
    (
        "cdp_integration.capture.logger",
        "orjson.loads",
    ): "a round trip of our own value through JSON (no file)",
    (
        "cdp_integration.evaluate.verified",
        "json.loads",
    ): "text already loaded and bounded (an answer, a model dump)",
    (
        "cdp_integration.replay.recorded",
        "json.loads",
    ): "a response body of a loaded session (bounded by its loader)",
    ("cdp_integration.session.redact", "orjson.loads"): "bodies of a loaded session (bounded by its loader)",
    (
        "cdp_integration.evaluate.batch",
        "import pickle",
    ): "checks that a scorer can be sent to workers (dumps only)",
    (
        "cdp_integration.evaluate.batch",
        "orjson.loads",
    ): "lines of output.jsonl read by untrusted.iter_file_lines (bounded)",
    (
        "cdp_integration.evaluate.report",
        "orjson.loads",
    ): "lines of output.jsonl read by untrusted.iter_file_lines (bounded)",
    ("cdp_integration.evaluate.report", "os.fdopen"): "wraps the descriptor untrusted.open_input returned",
    (
        "cdp_integration.evaluate.runs",
        "orjson.loads",
    ): "lines of output.jsonl read by untrusted.iter_file_lines (bounded)",
    ("cdp_integration.evaluate.runs", "os.fdopen"): "wraps the descriptor untrusted.open_input returned",
    (
        "cdp_integration.evaluate.explain",
        "open",
    ): "the config file the evaluator reads: ours, in our temp dir",
    (
        "cdp_integration.evaluate.explain",
        "json.load",
    ): "the config file the evaluator reads: ours, in our temp dir",
    ("cdp_integration.evaluate.verified", ".write_text"): "the task file of our own temporary directory",
    ("cdp_integration.webarena", ".write_text"): "the evaluator's config file in our own temporary directory",
    ("cdp_integration.environment", ".write_text"): "NLTK's punkt tables staged from the installed package",
    ("cdp_integration.environment", "json.loads"): "Playwright's browsers.json (package data)",
    (
        "cdp_integration.imports.agentlab",
        "import pickle",
    ): "raises pickle.UnpicklingError only (untrusted.unpickle loads)",
    (
        "cdp_integration.session.store",
        "orjson.loads",
    ): "lines read by untrusted-bounded streaming (values counted first)",
}
"""(module, what) -> why it is not outside input read behind the reader's back. ``demo`` (our own
site's data and pages) is in no layer and not checked."""


def _raw_reads(module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found |= {f"import {n}" for n in names if n.split(".")[0] in RAW_MODULES}
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in RAW_CALLS:
                found.add(func.id)
            elif isinstance(func, ast.Attribute):
                if isinstance(func.value, ast.Name) and f"{func.value.id}.{func.attr}" in RAW_CALLS:
                    found.add(f"{func.value.id}.{func.attr}")
                elif f".{func.attr}" in RAW_CALLS:
                    found.add(f".{func.attr}")
    return found


def test_outside_files_are_read_only_through_the_untrusted_reader() -> None:
    """Code outside ``session/untrusted.py`` never opens, unzips, unpickles or parses a file itself."""
    direct = sorted(
        f"{module}: {what}"
        for module in MODULES
        if module != READER and _layer(module) is not None
        for what in _raw_reads(module)
        if (module, what) not in ALLOWED_RAW
    )
    assert direct == []


def test_the_raw_read_scan_sees_what_it_must() -> None:
    """The scan itself finds each kind (else the test above could not fail)."""
    assert {"os.open", "import zipfile", "import pickle", "orjson.loads"} <= _raw_reads(READER)
    assert ".read_text" in _raw_reads("cdp_integration.debug.viewer")
    stale = [key for key in ALLOWED_RAW if key[1] not in _raw_reads(key[0])]
    assert stale == [], "allow-list entries that no longer match anything: remove them"
