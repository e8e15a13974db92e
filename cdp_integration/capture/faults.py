"""Capture never raises into the agent's episode: a failure becomes a ``CaptureFault`` in the record.

``as_fault(faults, stage)`` is that rule in one place: the block runs, and an ``Exception`` it raises
is appended to ``faults`` under ``stage`` instead of propagating.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cdp_integration.session.models import CaptureFault

__all__ = ["as_fault", "fault"]


def fault(stage: str, exc: BaseException, tab_id: str | None = None) -> CaptureFault:
    """The recorded form of ``exc``, raised at ``stage`` (of the tab ``tab_id``, if any)."""
    return CaptureFault(
        stage=stage, error_type=type(exc).__name__, message=str(exc).strip()[:1000], tab_id=tab_id
    )


@contextlib.contextmanager
def as_fault(faults: list[CaptureFault], stage: str, tab_id: str | None = None) -> Iterator[None]:
    """Run the block; an ``Exception`` from it is appended to ``faults`` as a fault of ``stage``."""
    try:
        yield
    except Exception as exc:
        faults.append(fault(stage, exc, tab_id))
