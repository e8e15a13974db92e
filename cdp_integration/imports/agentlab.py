"""AgentLab / BrowserGym experiment folders -> sessions, read without running a line of their code.

AgentLab saves each step as ``step_N.pkl.gz``: a pickled ``StepInfo`` whose ``obs`` holds BrowserGym's
observation (``dom_object``: a CDP ``DOMSnapshot.captureSnapshot``; ``axtree_object``; ``url``;
``open_pages_urls`` / ``open_pages_titles``; ``active_page_index``; ``chat_messages``), plus
``summary_info.json``. The standard pickle loader calls whatever the file names, so these files are
read by ``untrusted.unpickle`` with ``_ALLOWED``: every global a pickle names is looked up in an allow-list of AgentLab's
and BrowserGym's record classes (rebuilt as plain attribute bags, never imported) and numpy's array
constructors (rebuilt as lists from the raw bytes, numpy itself never imported); any other name
(``os.system``, ``builtins.eval``, a class of some other package) is refused by name before
anything is called. Files are bounded like session files (size, inflated size, values, nesting).

The DOM is rebuilt as HTML from the DOMSnapshot (typed values, checked and selected state as the
snapshot reports them). An observation whose preprocessor kept only BrowserGym's ``dom_txt`` (the
default ``Agent.obs_preprocessor`` drops ``dom_object``) has no DOM here: ``dom_txt`` lacks typed
values, so reading it as the page could answer wrong. AgentLab keeps no network log and no cookies: program_html on a page other
than the open ones is a ``ReplayMissError``. AgentLab's ``screenshot_step_N.png`` beside step N becomes
that step's screenshot of the active tab (``read_screenshot``: bounded, inside the folder, no symlinks).
"""

from __future__ import annotations

import html as html_lib
import pickle
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cdp_integration.errors import SessionFormatError
from cdp_integration.imports.common import ImportedEpisode, check_step_budget, read_json_file, read_screenshot
from cdp_integration.session.limits import SessionLimits, limit_hint
from cdp_integration.session.models import Step, TabState
from cdp_integration.session.untrusted import Budget, clean_text, read_input, unpickle

__all__ = ["MAX_PICKLE_BYTES", "dom_snapshot_html", "import_agentlab", "load_step_pickle"]

MAX_PICKLE_BYTES = 256 * 1024**2
"""A step file, compressed and inflated."""

_STEP = re.compile(r"^step_(\d+)\.pkl\.gz$")


class _Record:
    """An allow-listed class of a pickle, rebuilt as a bag of attributes (its code never runs)."""

    _kind = "record"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["_args"] = args
        self.__dict__.update(kwargs)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}  # (dict, slots)
        if isinstance(state, dict):
            self.__dict__.update({str(k): v for k, v in state.items()})

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class _DictRecord(dict[Any, Any]):
    """An allow-listed ``dict`` subclass (AgentLab's chat messages)."""

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.update(state)


class _DType:
    """numpy's ``dtype(kind, align, copy)`` as its description only."""

    def __init__(self, kind: Any = "", *_: Any) -> None:
        self.kind = kind if isinstance(kind, str) else ""
        self.order = "<"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) > 1 and isinstance(state[1], str):
            self.order = state[1] if state[1] in "<>" else "<"


_NUMBER_FORMATS = {
    "i8": "q",
    "i4": "i",
    "i2": "h",
    "i1": "b",
    "u8": "Q",
    "u4": "I",
    "u1": "B",
    "f8": "d",
    "f4": "f",
}


class _Array:
    """numpy's ``ndarray`` rebuilt from its pickled state: numbers of plain dtypes as a list."""

    def __init__(self, *_: Any) -> None:
        self.values: list[Any] = []

    def __setstate__(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 5):
            return
        _version, _shape, dtype, _fortran, raw = state
        kind = dtype.kind if isinstance(dtype, _DType) else ""
        code = _NUMBER_FORMATS.get(kind.lstrip("<>|="))
        if code is None or kind == "b1":
            if kind in ("b1", "?") and isinstance(raw, bytes | bytearray):
                self.values = [bool(b) for b in raw]
            elif isinstance(raw, list):
                self.values = raw  # an object array: its items were unpickled (allow-listed) already
            return
        if isinstance(raw, bytes | bytearray) and len(raw) % struct.calcsize(code) == 0:
            order = dtype.order if isinstance(dtype, _DType) else "<"
            self.values = list(struct.unpack(f"{order}{len(raw) // struct.calcsize(code)}{code}", raw))


def _reconstruct(cls: Any, *_: Any) -> Any:
    if cls is not _Array:
        raise pickle.UnpicklingError("numpy _reconstruct of something other than an ndarray")
    return _Array()


def _scalar(dtype: Any, raw: Any = b"") -> Any:
    array = _Array()
    array.__setstate__((1, (), dtype, False, raw))
    return array.values[0] if array.values else None


def _bytearray(source: Any = b"", *_: Any) -> bytearray:
    """``bytearray`` of data the pickle holds; never of a size it names (``bytearray(1.4e9)``)."""
    if isinstance(source, bytes | bytearray):
        return bytearray(source)
    if isinstance(source, str):
        return bytearray(source.encode("latin-1", "replace"))
    raise pickle.UnpicklingError("bytearray of something other than bytes")


def _copyreg_reconstructor(cls: Any, base: Any, state: Any) -> Any:
    if not (isinstance(cls, type) and issubclass(cls, _Record | _DictRecord)):
        raise pickle.UnpicklingError("copyreg._reconstructor of a class that is not allow-listed")
    return cls()


_RECORDS = {
    ("agentlab.experiments.loop", "StepInfo"),
    ("agentlab.experiments.loop", "StepTimestamps"),
    ("agentlab.experiments.loop", "ExpArgs"),
    ("agentlab.agents.agent_args", "AgentArgs"),
    ("browsergym.experiments.loop", "StepInfo"),
    ("browsergym.experiments.loop", "StepTimestamps"),
    ("browsergym.experiments.agent", "AgentInfo"),
    ("bgym", "AgentInfo"),
}
_DICT_RECORDS = {
    ("agentlab.llm.llm_utils", "Discussion"),
    ("agentlab.llm.llm_utils", "BaseMessage"),
    ("agentlab.llm.llm_utils", "HumanMessage"),
    ("agentlab.llm.llm_utils", "AIMessage"),
    ("agentlab.llm.llm_utils", "SystemMessage"),
    ("collections", "OrderedDict"),
}
_ALLOWED: dict[tuple[str, str], Any] = {
    **{key: type(key[1], (_Record,), {"_kind": f"{key[0]}.{key[1]}"}) for key in sorted(_RECORDS)},
    **{key: type(key[1], (_DictRecord,), {}) for key in sorted(_DICT_RECORDS)},
    ("numpy", "ndarray"): _Array,
    ("numpy", "dtype"): _DType,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("copyreg", "_reconstructor"): _copyreg_reconstructor,
    ("builtins", "object"): _Record,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): _bytearray,
}
"""(module, name) -> what the pickle gets instead. Nothing here runs code named by the file."""


def _refusal(module: str, name: str) -> str:
    return (
        f"refuses to load {module}.{name} from the pickle (only AgentLab's step records, "
        "plain data and numpy arrays are read; a pickle naming anything else could run code)"
    )


def _plain(value: Any, budget: Budget) -> Any:
    """The loaded value as JSON-like data (records as dicts, arrays as lists), iteratively.

    Every use of a shared object is built anew, so each is counted against ``budget`` (a pickle of
    a list holding itself twice, sixty levels down, is 2**60 uses); strings are made valid UTF-8.
    """
    out: list[Any] = []
    # (value, depth, container to fill, key) ; containers are filled in place
    root: list[Any] = [None]
    stack: list[tuple[Any, int, Any, Any]] = [(value, 0, root, 0)]
    while stack:
        item, depth, into, key = stack.pop()
        if depth > _MAX_PICKLE_DEPTH:
            raise SessionFormatError(f"pickle data nested deeper than {_MAX_PICKLE_DEPTH} levels")
        budget.spend(_VALUE_BYTES)
        made: Any
        children: list[tuple[Any, Any]] = []
        if isinstance(item, _Record):
            made = {}
            children = [(str(k), v) for k, v in item.as_dict().items()]
        elif isinstance(item, _Array):
            made = [None] * len(item.values)
            children = list(enumerate(item.values))
        elif isinstance(item, dict):
            made = {}
            children = [(clean_text(str(k)), v) for k, v in item.items()]
        elif isinstance(item, list | tuple | set | frozenset):
            made = [None] * len(item)
            children = list(enumerate(item))
        elif isinstance(item, bytes | bytearray):
            made = None
        elif isinstance(item, _DType):
            made = item.kind
        elif isinstance(item, str):
            budget.spend(len(item))
            made = clean_text(item)
        elif item is None or isinstance(item, bool | int | float):
            made = item
        else:
            made = None  # a complex number, an allow-listed constructor's odd result: not data we read
        into[key] = made
        for child_key, child in reversed(children):
            stack.append((child, depth + 1, made, child_key))
    del out
    return root[0]


def _children(item: Any) -> list[Any]:
    if isinstance(item, _Record):
        return list(item.as_dict().values())
    if isinstance(item, _Array):
        return item.values
    if isinstance(item, dict):
        return list(item.values())
    if isinstance(item, list | tuple | set | frozenset):
        return list(item)
    return []


def _expanded_cost(value: Any, cap: int) -> int:
    """What ``_plain`` would spend on ``value`` (at most ``cap + 1``), computed once per distinct
    object (post-order, memo by identity): a 600-byte pickle of lists sharing lists is refused at
    once, without walking its 2**60 uses."""
    costs: dict[int, int] = {}
    open_items: set[int] = set()
    alive: list[Any] = []  # keeps every costed object alive, so no id is reused meanwhile
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        key = id(item)
        if key in costs:
            continue
        if not done and key in open_items:
            raise SessionFormatError("the pickle's data contains itself (a cycle); refused")
        if isinstance(item, str):
            costs[key] = _VALUE_BYTES + len(item)
            continue
        children = _children(item)
        if not children:
            costs[key] = _VALUE_BYTES
            continue
        if done:
            costs[key] = min(cap + 1, _VALUE_BYTES + sum(costs[id(child)] for child in children))
            open_items.discard(key)
            alive.append(item)
        else:
            open_items.add(key)
            stack.append((item, True))
            stack.extend((child, False) for child in children if id(child) not in costs)
    return costs[id(value)]


_MAX_PICKLE_DEPTH = 200
"""Below the 254 levels a session can be written with."""
_VALUE_BYTES = 64


def load_step_pickle(
    path: Path, limits: SessionLimits | None = None, *, root: Path | None = None
) -> dict[str, Any]:
    """One ``step_N.pkl.gz`` as plain data (``SessionFormatError`` for anything else, one line).

    Read by ``untrusted.unpickle`` (opcodes, memo and sizes checked before anything is built; only
    the allow-listed globals of ``_ALLOWED``), then walked into plain data within the limits'
    ``max_expanded_bytes``. ``root``: the study folder (no symlink below it is followed)."""
    limits = limits or SessionLimits.from_env()
    source = clean_text(str(path))
    data = read_input(
        path, max_bytes=min(MAX_PICKLE_BYTES, limits.max_input_bytes), root=root, what="pickle file"
    )
    loaded = unpickle(data, source, limits, _ALLOWED, _refusal)
    del data
    try:
        cost = _expanded_cost(loaded, limits.max_expanded_bytes)
    except SessionFormatError as exc:
        raise SessionFormatError(f"{source}: {exc}") from None
    if cost > limits.max_expanded_bytes:
        raise SessionFormatError(
            f"{source}: the pickle's shared references expand to more than {limits.max_expanded_bytes} "
            f"bytes of step data ({limit_hint('max_expanded_bytes')}); refused"
        )
    budget = Budget(limits.max_expanded_bytes, source, "bytes of step data", limit_hint("max_expanded_bytes"))
    plain = _plain(loaded, budget)
    if not isinstance(plain, dict):
        raise SessionFormatError(f"{source}: the pickle holds no StepInfo record")
    return plain


# -- DOMSnapshot -> HTML ------------------------------------------------------------------------

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9:._-]*$")


def _rare(data: Any) -> dict[int, Any]:
    """CDP ``RareStringData`` / ``RareIntegerData`` as {node: value}; ``RareBooleanData`` as {node: True}."""
    if not isinstance(data, dict):
        return {}
    index = data.get("index") or []
    values = data.get("value")
    if values is None:
        return {int(i): True for i in index if isinstance(i, int)}
    return {int(i): v for i, v in zip(index, values, strict=False) if isinstance(i, int)}


def dom_snapshot_html(
    snapshot: dict[str, Any], max_nodes: int = 2_000_000, budget: Budget | None = None
) -> tuple[str, str]:
    """(HTML, title) of the first document of a ``DOMSnapshot.captureSnapshot`` result.

    ``budget``: the bytes of HTML it may build, counted as they are added (text nodes may all name
    one long string of the snapshot's table: each use is a copy in the HTML)."""
    budget = budget or Budget(256 * 1024**2, "the observation's DOM snapshot", "bytes of HTML")
    strings = snapshot.get("strings")
    documents = snapshot.get("documents")
    if not isinstance(strings, list) or not isinstance(documents, list) or not documents:
        raise SessionFormatError("the observation's DOM snapshot has no documents")
    nodes = documents[0].get("nodes") if isinstance(documents[0], dict) else None
    if not isinstance(nodes, dict):
        raise SessionFormatError("the observation's DOM snapshot has no nodes")

    def text(i: Any) -> str:
        return (
            strings[i] if isinstance(i, int) and 0 <= i < len(strings) and isinstance(strings[i], str) else ""
        )

    parents = nodes.get("parentIndex") or []
    types = nodes.get("nodeType") or []
    names = nodes.get("nodeName") or []
    values = nodes.get("nodeValue") or []
    attributes = nodes.get("attributes") or []
    if len(parents) > max_nodes:
        raise SessionFormatError(f"the DOM snapshot has more than {max_nodes} nodes")
    input_values = {k: text(v) for k, v in _rare(nodes.get("inputValue")).items()}
    text_values = {k: text(v) for k, v in _rare(nodes.get("textValue")).items()}
    checked = _rare(nodes.get("inputChecked"))
    selected = _rare(nodes.get("optionSelected"))
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        if isinstance(parent, int) and 0 <= parent < i:
            children.setdefault(parent, []).append(i)
    parts: list[str] = []
    title: list[str] = []

    def add(text: str) -> None:
        budget.spend(len(text), "DOM snapshot")
        parts.append(text)

    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        i, closing = stack.pop()
        kind = types[i] if i < len(types) else 0
        name = text(names[i] if i < len(names) else -1)
        if closing:
            add(f"</{name.lower()}>")
            continue
        if kind == 3:
            value = text(values[i] if i < len(values) else -1)
            parent_name = text(names[parents[i]]) if isinstance(parents[i], int) and parents[i] >= 0 else ""
            add(value if parent_name in ("STYLE", "SCRIPT") else html_lib.escape(value, quote=False))
            if parent_name == "TITLE":
                title.append(value)
            continue
        if kind == 10:
            add(f"<!DOCTYPE {re.sub(r'[^A-Za-z0-9]', '', name) or 'html'}>")
            continue
        if kind == 1 and _NAME.match(name):
            lower = name.lower()
            pairs = attributes[i] if i < len(attributes) and isinstance(attributes[i], list) else []
            attrs = {text(pairs[j]): text(pairs[j + 1]) for j in range(0, len(pairs) - 1, 2)}
            if lower == "input" and i in input_values and attrs.get("type", "").lower() != "file":
                attrs["value"] = input_values[i]
            if i in checked:
                attrs["checked"] = ""
            if lower == "option":
                attrs.pop("selected", None)
                if i in selected:
                    attrs["selected"] = ""
            written = "".join(
                f' {k}="{html_lib.escape(v)}"' if v or k not in ("checked", "selected") else f" {k}"
                for k, v in attrs.items()
                if _NAME.match(k)
            )
            add(f"<{lower}{written}>")
            if lower in _VOID:
                continue
            stack.append((i, True))
            if lower == "textarea" and i in text_values:
                add(html_lib.escape(text_values[i], quote=False))
                continue
        stack.extend((child, False) for child in reversed(children.get(i, [])))
    return "".join(parts), " ".join("".join(title).split())


# -- experiment folder -> episode ---------------------------------------------------------------


def _final_answer(obs: dict[str, Any]) -> str | None:
    """The chat's last message when the assistant wrote it: what BrowserGym's ``validate`` takes as the
    answer (its greeting included, as live)."""
    messages = obs.get("chat_messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    return (
        last.get("message")
        if last.get("role") == "assistant" and isinstance(last.get("message"), str)
        else None
    )


def _task_id(summary: Any, folder: Path) -> int | None:
    """The task name's number (``webarena.<id>``): from the summary when it names the task, else from
    AgentLab's folder name ``<date>_<agent>_on_<task_name>_<seed>``."""
    text = ""
    if isinstance(summary, dict):
        text = str(summary.get("env_args.task_name") or summary.get("task_name") or "")
    if not text:
        named = re.search(r"_on_(.+)_\d+$", folder.name)
        text = named.group(1) if named else ""
    match = re.search(r"\.(\d+)$", text)
    return int(match.group(1)) if match else None


def import_agentlab_experiment(folder: Path, root: Path | None = None) -> ImportedEpisode:
    """One experiment folder (``step_N.pkl.gz`` ... and ``summary_info.json``); ``root``: the folder
    the user named (no symlink below it is followed). A field of an unexpected type is one line."""
    try:
        return _experiment(folder, root if root is not None else folder)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        if isinstance(exc, SessionFormatError):
            raise
        raise SessionFormatError(
            f"{clean_text(str(folder))}: not an AgentLab experiment of the expected shape "
            f"({type(exc).__name__}: {clean_text(str(exc)).splitlines()[0][:160] if str(exc) else ''})"
        ) from None


def _experiment(folder: Path, root: Path) -> ImportedEpisode:
    limits = SessionLimits.from_env()
    files = sorted(
        ((int(m.group(1)), p) for p in folder.iterdir() if (m := _STEP.match(p.name))),
        key=lambda item: item[0],
    )
    if not files:
        raise SessionFormatError(f"{folder}: no step_N.pkl.gz files (not an AgentLab experiment folder)")
    check_step_budget(len(files) - 1, 0, limits, str(folder))
    summary = (
        read_json_file(folder / "summary_info.json", "summary", root=root, limits=limits)
        if (folder / "summary_info.json").exists()
        else {}
    )
    html_budget = Budget(
        limits.max_expanded_bytes,
        clean_text(str(folder)),
        "bytes of rebuilt HTML",
        limit_hint("max_expanded_bytes"),
    )
    steps: list[Step] = []
    answer: str | None = None
    previous_action: str | None = None
    for number, path in files:
        info = load_step_pickle(path, limits, root=root)
        obs = info.get("obs")
        action = info.get("action") if isinstance(info.get("action"), str) else None
        if not isinstance(obs, dict):  # the last StepInfo of an episode may carry no observation
            previous_action = action
            continue
        urls = [u for u in obs.get("open_pages_urls") or [] if isinstance(u, str)]
        titles = [t for t in obs.get("open_pages_titles") or [] if isinstance(t, str)]
        active_raw = obs.get("active_page_index")
        active = active_raw[0] if isinstance(active_raw, list) and active_raw else active_raw
        told = isinstance(active, int) and 0 <= active < max(len(urls), 1)
        active = active if isinstance(active, int) and told else 0
        observed_url = obs.get("url")
        url: str = (
            observed_url if isinstance(observed_url, str) else (urls[active] if urls else "about:blank")
        )
        html: str | None = None
        title = ""
        if isinstance(obs.get("dom_object"), dict):
            html, title = dom_snapshot_html(obs["dom_object"], budget=html_budget)
        # BrowserGym's default preprocessor keeps only ``dom_txt`` (``flatten_dom_to_str``): typed text
        # of a textarea is not in it (only a value attribute), so it is not used as the page (a miss)
        title = title or (titles[active] if active < len(titles) else "")
        screenshot = read_screenshot(folder, f"screenshot_step_{number}.png")
        tabs = [
            TabState(
                tab_id=f"page-{i}",
                url=page_url,
                title=(titles[i] if i < len(titles) else "") or (title if i == active else ""),
                active=i == active,
                html=html if i == active else None,
                screenshot_png=screenshot if i == active else None,
            )
            for i, page_url in enumerate(urls or [url])
        ]
        answer = _final_answer(obs)
        reward = info.get("reward")
        steps.append(
            Step(
                index=len(steps),
                trigger="reset" if not steps else "action",
                action=previous_action,
                timestamp=float(number),
                url=url,
                title=title,
                tabs=tabs,
                # BrowserGym's own active page (``active_page_index``): the harness's current tab
                current_tab_source="harness" if told else None,
                reward=float(reward)
                if isinstance(reward, int | float) and not isinstance(reward, bool)
                else None,
            )
        )
    if not steps:
        raise SessionFormatError(f"{folder}: no step holds an observation")
    task_id = _task_id(summary, folder)
    return ImportedEpisode(
        name=folder.name,
        source=str(folder),
        steps=steps,
        task_id=task_id,
        final_answer=answer,
        lacks=[
            "network traffic and cookies (program_html on pages not open at the step is not answerable)",
            "other tabs' DOM (only the active page's DOMSnapshot is observed)",
            "stylesheets (layout-dependent questions are refused)",
            "the DOM when the agent's preprocessor dropped the observation's DOMSnapshot (only dom_txt kept)",
        ],
        tool="agentlab",
        network_missing="all traffic (AgentLab's step records hold no network log)",
    )


def import_agentlab(path: Path) -> Iterator[ImportedEpisode]:
    """``path``: one experiment folder, or a study folder of them (searched one level deep)."""
    if any(_STEP.match(p.name) for p in path.iterdir()):
        yield import_agentlab_experiment(path, path)
        return
    folders = sorted(
        p for p in path.iterdir() if p.is_dir() and any(_STEP.match(q.name) for q in p.iterdir())
    )
    if not folders:
        raise SessionFormatError(f"{path}: no AgentLab experiment folder (step_N.pkl.gz files) here")
    for folder in folders:
        yield import_agentlab_experiment(folder, path)
