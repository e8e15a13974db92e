"""The session file a logger writes: ``*.partial`` step by step, finished atomically, recovered after a failure.

A failed write (a full disk) is a fault of the next step, and the steps from then on are held in
memory; ``finish`` first rewrites the partial file from what it holds plus the held-back steps.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from cdp_integration.capture.faults import fault
from cdp_integration.errors import SessionFormatError
from cdp_integration.session.models import CaptureFault, SessionEnd, SessionHeader, Step
from cdp_integration.session.store import PARTIAL_SUFFIX, SESSION_SUFFIX, SessionWriter, load_session

__all__ = ["RecoveringWriter"]


class RecoveringWriter:
    """Writes steps to ``<session_dir>/<instance_id>.session.jsonl.gz.partial``; never raises from ``append``.

    ``session_dir`` and ``instance_id`` may change until the file is opened. ``header()`` is called
    when the file is opened (at the first step, once the browser is known).
    A failed write is appended to ``faults`` (the logger's pending faults) as stage ``write``.
    """

    def __init__(
        self,
        session_dir: Path,
        instance_id: str | None,
        header: Callable[[], SessionHeader],
        faults: list[CaptureFault],
        *,
        compresslevel: int,
    ) -> None:
        self.session_dir = session_dir
        self.instance_id = instance_id
        self.header = header
        self.faults = faults
        self.compresslevel = compresslevel
        self.current: SessionWriter | None = None
        """The open partial file, if any."""
        self.unwritten: list[Step] = []
        """Steps held back since a write failed."""
        self.default_stem = f"session-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """The file name without an instance id; unique, since loggers of one process may write at once."""

    @property
    def partial_path(self) -> Path | None:
        return self.current.partial_path if self.current else None

    def final_path(self, instance_id: str | None) -> Path:
        return self.session_dir / f"{self._file_stem(instance_id)}{SESSION_SUFFIX}"

    def _file_stem(self, instance_id: str | None) -> str:
        return instance_id or self.instance_id or self.default_stem

    def _ensure(self) -> SessionWriter:
        if self.current is None:
            partial = self.session_dir / f"{self._file_stem(None)}{SESSION_SUFFIX}{PARTIAL_SUFFIX}"
            self.current = SessionWriter(partial, self.header(), compresslevel=self.compresslevel)
        return self.current

    def append(self, step: Step) -> None:
        """Write the step; after a write failure, keep steps in memory until ``finish``."""
        if self.unwritten:
            self.unwritten.append(step)
            return
        try:
            self._ensure().write_step(step)
        except Exception as exc:  # held back, and a fault of the next step
            if self.current is not None:
                with contextlib.suppress(Exception):  # closing flushes the buffer: fails the same way
                    self.current.abort()
            self.unwritten.append(step)
            self.faults.append(fault("write", exc))

    def finish(self, end: SessionEnd, final_path: Path) -> Path:
        """Write the end record and move the file to ``final_path``; raises if it cannot."""
        if self.unwritten:
            self._recover()
        return self._ensure().finish(end, final_path)

    def _recover(self) -> None:
        """After a failed write: rewrite what the broken partial file holds, plus the held-back steps.

        If this fails too, every step is back in memory and the half-written file is gone, so a
        later ``finish`` starts over without losing or repeating a step.
        """
        broken, self.current = self.current, None
        if broken is not None and broken.partial_path.exists():
            with contextlib.suppress(SessionFormatError):
                self.unwritten[:0] = load_session(broken.partial_path).steps
            broken.partial_path.unlink(missing_ok=True)
        try:
            writer = self._ensure()
            for step in self.unwritten:
                writer.write_step(step)
        except Exception:  # cleaned up, then raised
            if self.current is not None:
                with contextlib.suppress(Exception):  # the error being raised says what went wrong
                    self.current.abort()
                self.current.partial_path.unlink(missing_ok=True)
                self.current = None
            raise
        self.unwritten = []
