"""Replay: a captured session behind Playwright's ``Page`` / ``BrowserContext`` / ``CDPSession`` types.

Two ways in: ``replay_step(session, step)`` for a loaded session, and the design card's
``WebArenaCDPIntegration(session_dir).create_mock_page_and_client(instance_id, step)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from cdp_integration.errors import ReplayMissError
from cdp_integration.replay.cdp import MockCDPSession
from cdp_integration.replay.offline import OfflineBrowser, ReplayDocument, offline_browser
from cdp_integration.replay.page import MockBrowserContext, MockLocator, MockPage, replay_step
from cdp_integration.session.store import SESSION_SUFFIX, load_session

__all__ = [
    "MockBrowserContext",
    "MockCDPSession",
    "MockLocator",
    "MockPage",
    "OfflineBrowser",
    "ReplayDocument",
    "WebArenaCDPIntegration",
    "offline_browser",
    "replay_step",
]


class WebArenaCDPIntegration:
    """The seed plan's entry point: sessions in a directory, by instance id."""

    def __init__(self, session_dir: str | os.PathLike[str]) -> None:
        self.session_dir = Path(session_dir)

    def session_path(self, instance_id: str) -> Path:
        path = self.session_dir / f"{instance_id}{SESSION_SUFFIX}"
        if not path.exists():
            known = sorted(
                p.name.removesuffix(SESSION_SUFFIX) for p in self.session_dir.glob(f"*{SESSION_SUFFIX}")
            )
            raise ReplayMissError(
                f"no session {instance_id!r} in {self.session_dir} (found: {', '.join(known[:10]) or 'none'})"
            )
        return path

    def create_mock_page_and_client(
        self, instance_id: str, step: int = -1
    ) -> tuple[MockPage, MockCDPSession]:
        """The page as it was at ``step`` (default: the end of the episode) and a CDP session on it."""
        page = replay_step(load_session(self.session_path(instance_id)), step)
        return page, MockCDPSession(page)
