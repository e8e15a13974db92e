"""MkDocs hooks: load every lazy ``cdp-session`` command before mkdocs-click reads the group.

``cdp_integration.cli`` imports heavy commands only when they run (so ``--help`` stays quick);
mkdocs-click lists ``group.commands``, so the CLI reference would miss them without this.
"""

from __future__ import annotations

from typing import Any


def on_config(config: Any) -> Any:
    import click

    from cdp_integration.cli import LAZY_COMMANDS, cli

    context = click.Context(cli)
    for name in LAZY_COMMANDS:
        cli.get_command(context, name)
    return config
