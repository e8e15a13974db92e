"""What every importer shares: the imported episode, provenance, answers and configs, the writer.

An importer turns one recording into ``ImportedEpisode``s (steps of our session model, the final
answer, the task id, and what the format lacks); ``write_episode`` makes a finished session file of
it, stamped ``imported:<format>`` in the header (``options.provenance``), so every score and report
line made from it says where it came from.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cdp_integration.errors import SessionFormatError
from cdp_integration.session.limits import SessionLimits
from cdp_integration.session.models import Cookie, Evaluation, NetworkExchange, SessionEnd, Step
from cdp_integration.session.store import (
    PARTIAL_SUFFIX,
    SESSION_SUFFIX,
    Session,
    SessionWriter,
    load_session,
    new_header,
)
from cdp_integration.session.untrusted import clean_text, make_output_dir, read_input, read_json

__all__ = [
    "FORMATS",
    "CookieJar",
    "ImportedEpisode",
    "check_step_budget",
    "imported_gap",
    "imported_provenance",
    "imported_verified_gap",
    "load_answers",
    "read_json_file",
    "read_screenshot",
    "safe_name",
    "write_episode",
]

FORMATS = ("playwright-trace", "verified", "browser-use", "agentlab")
"""The recording formats ``cdp-session import`` reads."""

PROVENANCE_PREFIX = "imported:"


def imported_gap(session_options: Mapping[str, Any], eval_types: list[str]) -> str | None:
    """Why an imported session cannot answer one of ``eval_types`` on its final state, or None.

    The replay mocks answer every page question loudly by themselves; the final answer and the final
    URL are read without a question that could miss, so the importer records whether it knew them.
    """
    imported = session_options.get("imported")
    if not isinstance(imported, Mapping):
        return None
    fmt = imported.get("format")
    if "string_match" in eval_types and imported.get("answer_known") is False:
        return (
            f"string_match needs the final answer: the imported {fmt} recording does not hold the agent's "
            "final answer as its chat held it (pass it with cdp-session import --answers)"
        )
    if "url_match" in eval_types and imported.get("final_url_known") is False:
        return f"url_match needs the final URL: the imported {fmt} recording ends with actions whose page it did not record"
    return None


def imported_verified_gap(session: Session) -> str | None:
    """Why WebArena-Verified cannot score an imported ``session`` on what its recording held, or None.

    Verified scores the agent's response and the agent's network log (its last navigation, its
    POSTs). A recording without the answer (a trace without ``--answers``) or without the agent's
    traffic (no HAR, browser-use's HTTPS-only HAR of a plain-HTTP site), or whose page loads lack
    the request headers Verified tells navigations by, would be scored on a made-up input: a miss.
    """
    imported = session.header.options.get("imported")
    if not isinstance(imported, Mapping):
        return None
    fmt = imported.get("format")
    if imported.get("answer_known") is False and fmt != "verified":  # a run folder holds the response
        return (
            f"WebArena-Verified needs the agent's final answer: the imported {fmt} recording does not hold "
            "it (pass it with cdp-session import --answers)"
        )
    missing = imported.get("network_missing")
    if isinstance(missing, str) and missing:
        return (
            f"WebArena-Verified needs the agent's network log: the imported {fmt} recording lacks {missing}"
        )
    for position, step in enumerate(session.steps):
        for exchange in session.network_at(position):
            request = exchange.request
            if (
                exchange.origin == "agent"
                and request.resource_type == "Document"
                and request.method == "GET"
                and not any(name.lower() == "accept" for name in request.headers)
            ):
                return (
                    "WebArena-Verified tells navigations by their request headers: the imported "
                    f"{fmt} recording's page load {request.url[:120]} has none (step {step.index})"
                )
    return None


def imported_provenance(session_options: Mapping[str, Any]) -> str | None:
    """``imported:<format>`` when the session was imported (its header's ``options.provenance``)."""
    value = session_options.get("provenance")
    return value if isinstance(value, str) and value.startswith(PROVENANCE_PREFIX) else None


@dataclass
class ImportedEpisode:
    """One recording turned into our model, before it is written."""

    name: str
    """The output file's stem (the task id when known)."""
    source: str
    steps: list[Step]
    task_id: int | None = None
    final_answer: str | None = None
    answer_text_known: bool = True
    """``final_answer`` is the agent's answer as its chat held it (what WebArena's string_match reads),
    ``None`` meaning it gave none; False when the format does not hold the chat (traces) or holds only
    a transformed answer (Verified's structured response): ``--answers`` fills it in."""
    final_url_known: bool = True
    """False when the recording ends with actions whose resulting page was not recorded."""
    network_missing: str | None = None
    """What of the agent's traffic the recording lacks (WebArena-Verified scores it), None if it holds it."""
    lacks: list[str] = field(default_factory=list)
    """What the format does not hold (named in the header, so a miss can be explained)."""
    end_network: list[NetworkExchange] = field(default_factory=list)
    probe_pages: list[Any] = field(default_factory=list)
    """Pages the live evaluator opened after the last action (``TabState``), when the recording has them."""
    task: dict[str, Any] = field(default_factory=dict)
    tool: str | None = None
    """The recording tool and version, when the format names them."""


MAX_JSON_BYTES = 256 * 1024**2


def read_json_file(
    path: Path,
    what: str,
    *,
    root: Path | None = None,
    limits: SessionLimits | None = None,
    max_bytes: int = MAX_JSON_BYTES,
) -> Any:
    """A JSON document from a regular file (``untrusted.read_json``): bounded in bytes, values and
    nesting; ``root``: the recording's folder (no symlink below it is followed). One-line errors."""
    limits = limits or SessionLimits.from_env()
    return read_json(
        path, limits=limits, max_bytes=min(max_bytes, limits.max_input_bytes), root=root, what=what
    )


def check_step_budget(steps: int, cookies: int, limits: SessionLimits, source: str) -> None:
    """Refuse an episode the loader would refuse, while it is built: more steps than
    ``max_steps`` or more cookies in one step than ``max_cookies_per_step`` (the same limits)."""
    if steps > limits.max_steps:
        raise SessionFormatError(
            f"{clean_text(source)}: more than {limits.max_steps} steps (limit CDP_SESSION_MAX_STEPS)"
        )
    if cookies > limits.max_cookies_per_step:
        raise SessionFormatError(
            f"{clean_text(source)}: more than {limits.max_cookies_per_step} cookies in one step "
            "(limit CDP_SESSION_MAX_COOKIES_PER_STEP)"
        )


MAX_SCREENSHOT_BYTES = 16 * 1024**2
"""One imported screenshot (a full-page PNG of a tall page is a few MB)."""
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_screenshot(folder: Path, name: str, *, max_bytes: int = MAX_SCREENSHOT_BYTES) -> str | None:
    """Base64 of the PNG file ``name`` (relative) inside the recording's ``folder``, else None.

    None, never an error, for what a recording may lack or must not reach: a missing file, a name
    that is absolute or climbs out (``..``), a symlink anywhere below ``folder`` (``untrusted.read_input``
    opens every component with ``O_NOFOLLOW``), a file that is not regular, larger than ``max_bytes``
    or not a PNG. The step then simply has no screenshot.
    """
    relative = Path(name)
    if not name or relative.is_absolute() or any(part in ("", ".", "..") for part in relative.parts):
        return None
    try:
        data = read_input(
            folder / relative, max_bytes=max_bytes, root=folder, what="screenshot", inflate=False
        )
    except (OSError, SessionFormatError):
        return None
    if not bytes(data).startswith(_PNG_MAGIC):
        return None
    return base64.b64encode(bytes(data)).decode("ascii")


def load_answers(path: Path) -> dict[str, str | None]:
    """``--answers FILE``: a JSON object task id -> the agent's final answer (``null``: it gave none)."""
    document = read_json_file(path, "answers file")
    if not isinstance(document, dict):
        raise SessionFormatError(f"{path}: expected a JSON object task id -> answer")
    answers: dict[str, str | None] = {}
    for key, value in document.items():
        if value is not None and not isinstance(value, str):
            raise SessionFormatError(f"{path}: the answer of task {key[:40]!r} is not a string")
        answers[str(key)] = value
    return answers


def write_episode(
    episode: ImportedEpisode,
    fmt: str,
    output_dir: Path,
    *,
    answers: Mapping[str, str | None] | None = None,
    configs: Mapping[int, Mapping[str, Any]] | None = None,
    redact: bool = False,
    site_urls: Mapping[str, str] | None = None,
    output_root: Path | None = None,
    keep_screenshots: bool = False,
) -> Path:
    """Write ``episode`` as a finished session file in ``output_dir``; return its path.

    ``answers`` fill in a final answer the format does not hold; ``configs`` give the task's WebArena
    config by task id (the session then scores without ``--configs``). ``redact`` runs the project's
    redaction over the whole session first (post bodies of sign-in forms hold passwords); it drops
    screenshots (pixels cannot be redacted) unless ``keep_screenshots``. ``site_urls``
    fill in the URLs of sites the recording does not name (it knows where it ran; they do not override).
    ``output_root``: a folder ``output_dir`` is inside of by default: no symlink below it is followed
    (never below ``output_dir`` either: the ``.partial`` and the session are not written through one).
    The steps and cookies are checked against the same limits the loader applies.
    """
    episode.source = clean_text(episode.source)
    episode.name = clean_text(episode.name)
    if not episode.steps:
        raise SessionFormatError(f"{episode.source}: no browser state to import (no steps)")
    limits = SessionLimits.from_env()
    check_step_budget(
        len(episode.steps), max(len(step.cookies) for step in episode.steps), limits, episode.source
    )
    provenance = PROVENANCE_PREFIX + fmt
    task: dict[str, Any] = dict(episode.task)
    recorded_urls = task.get("site_urls")
    urls = {
        **{str(site).upper(): str(url) for site, url in (site_urls or {}).items()},
        **(
            {str(site).upper(): str(url) for site, url in recorded_urls.items()}
            if isinstance(recorded_urls, dict)
            else {}
        ),
    }
    if urls:
        task["site_urls"] = urls
    key = str(episode.task_id) if episode.task_id is not None else episode.name
    if episode.task_id is not None:
        task["task_id"] = episode.task_id
        if configs and episode.task_id in configs:
            task["config"] = dict(configs[episode.task_id])
    answer = episode.final_answer
    answer_known = episode.answer_text_known  # the format holds the chat: no answer there is a fact
    if not answer_known and answers and key in answers:
        answer, answer_known = answers[key], True
    probe = None
    if episode.probe_pages:
        probe = Evaluation(
            kind="probe",
            answer=answer,
            action_type="STOP" if answer is not None else None,
            chat_role="assistant" if answer is not None else None,
            pages=episode.probe_pages,
        )
    header = new_header(
        instance_id=episode.name,
        options={
            "provenance": provenance,
            "imported": {
                "format": fmt,
                "source": episode.source,
                "lacks": episode.lacks,
                "tool": episode.tool,
                "answer_known": answer_known,
                "final_url_known": episode.final_url_known,
                "network_missing": episode.network_missing,
            },
        },
        task=task,
    )
    end = SessionEnd(
        ended=episode.steps[-1].timestamp,
        instance_id=episode.name,
        final_answer=answer,
        network=episode.end_network,
        probe=probe,
    )
    session = Session(header=header, steps=tuple(episode.steps), end=end, complete=True)
    if redact:
        from cdp_integration.session.redact import RedactionPolicy, redact_session

        session = redact_session(session, RedactionPolicy(keep_screenshots=keep_screenshots))
    make_output_dir(output_dir, root=output_root)
    final = output_dir / (safe_name(episode.name) + SESSION_SUFFIX)
    partial = final.with_name(final.name + PARTIAL_SUFFIX)
    writer = SessionWriter(partial, session.header)
    try:
        for step in session.steps:
            writer.write_step(step)
        assert session.end is not None
        writer.finish(session.end, final)
    except (TypeError, ValueError, RecursionError) as exc:  # orjson: a value it cannot write
        writer.abort()
        partial.unlink(missing_ok=True)
        if isinstance(exc, SessionFormatError):
            raise
        raise SessionFormatError(
            f"{episode.source}: cannot be written as a session ({clean_text(str(exc))[:200]})"
        ) from None
    except BaseException:
        writer.abort()
        partial.unlink(missing_ok=True)
        raise
    del session
    try:  # what the loader refuses is not imported: the same limits, checked on the written file
        load_session(final, limits=limits)
    except SessionFormatError as exc:
        final.unlink(missing_ok=True)
        raise SessionFormatError(f"{episode.source}: imported, the session would not load: {exc}") from None
    return final


def safe_name(name: str) -> str:
    """The output file stem of an episode name: letters, digits, ``._-`` only (never a path)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "episode"
    return cleaned[:120]


class CookieJar:
    """Cookies as the HTTP headers of a recording show them (``Cookie``, ``Set-Cookie``).

    Recordings without a cookie store (traces, HARs) hold only these: a cookie set by a script
    (``document.cookie``) that was never sent is not known.
    """

    def __init__(self) -> None:
        self._cookies: dict[tuple[str, str, str], Cookie] = {}
        self._by_name: dict[str, dict[tuple[str, str, str], None]] = {}
        """Cookie name -> the keys holding it (in order): a ``Cookie`` header's names are looked up,
        not searched for in the whole jar."""

    def cookies(self) -> list[Cookie]:
        return list(self._cookies.values())

    def _put(self, key: tuple[str, str, str], cookie: Cookie) -> None:
        self._cookies[key] = cookie
        self._by_name.setdefault(key[2], {})[key] = None

    def _drop(self, key: tuple[str, str, str]) -> None:
        if self._cookies.pop(key, None) is not None:
            named = self._by_name.get(key[2], {})
            named.pop(key, None)

    def sent(self, url: str, header: str) -> None:
        """A request's ``Cookie`` header: cookies the browser held for ``url``'s host."""
        host = urlsplit(url).hostname or ""
        for part in header.split(";"):
            name, sep, value = part.strip().partition("=")
            if not sep or not name:
                continue
            matching = [
                key for key in self._by_name.get(name, {}) if _domain_matches(self._cookies[key].domain, host)
            ]
            if not matching:
                self._put((host, "/", name), Cookie(name=name, value=value, domain=host))
            for key in matching:
                cookie = self._cookies[key]
                if cookie.value != value:
                    self._cookies[key] = cookie.model_copy(update={"value": value})

    def set(self, url: str, header: str, now: float) -> None:
        """One ``Set-Cookie`` header value received from ``url`` at wall time ``now``."""
        host = urlsplit(url).hostname or ""
        first, *attributes = header.split(";")
        name, sep, value = first.strip().partition("=")
        if not sep or not name:
            return
        fields: dict[str, Any] = {"name": name, "value": value.strip(), "domain": host, "path": "/"}
        expires: float | None = None
        for attribute in attributes:
            key, _, raw = attribute.strip().partition("=")
            key = key.strip().lower()
            raw = raw.strip()
            if key == "domain" and raw:
                fields["domain"] = "." + raw.lstrip(".")
            elif key == "path" and raw.startswith("/"):
                fields["path"] = raw
            elif key == "httponly":
                fields["httpOnly"] = True
            elif key == "secure":
                fields["secure"] = True
            elif key == "samesite" and raw:
                fields["sameSite"] = raw.capitalize()
            elif key == "max-age":
                try:
                    expires = now + int(raw)
                except ValueError:
                    continue
            elif key == "expires" and expires is None:
                try:
                    expires = parsedate_to_datetime(raw).timestamp()
                except (TypeError, ValueError, IndexError, OverflowError):
                    continue
        cookie_key = (str(fields["domain"]), str(fields["path"]), name)
        if expires is not None and expires <= now:
            self._drop(cookie_key)
            self._drop((host, "/", name))
            return
        if expires is not None:
            fields.update(expires=expires, session=False)
        self._drop((host, "/", name))
        self._put(cookie_key, Cookie.model_validate(fields))


def _domain_matches(domain: str, host: str) -> bool:
    domain = domain.lstrip(".")
    return host == domain or host.endswith("." + domain)


def now() -> float:
    return time.time()
