"""Where a logger writes: loggers of one process never share a file."""

from __future__ import annotations

from pathlib import Path

from cdp_integration import CDPSessionLogger, load_session


def test_loggers_without_instance_ids_write_files_of_their_own(tmp_path: Path) -> None:
    loggers = [CDPSessionLogger(tmp_path) for _ in range(3)]
    for number, logger in enumerate(loggers):  # no page attached: steps with no tabs, still written
        for _ in range(number + 1):
            logger.capture_state_snapshot("manual")
    partials = {logger.partial_path for logger in loggers}
    assert len(partials) == 3 and all(path is not None and path.exists() for path in partials)
    saved = [logger.save_session() for logger in loggers]
    assert len(set(saved)) == 3
    assert [len(load_session(path).steps) for path in saved] == [1, 2, 3]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in saved)
