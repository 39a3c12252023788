"""Every command and command group answers ``--help`` (the CLI's own table of contents)."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from consumers.cli import app


def _paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):  # a group (typer vendors its own click)
            found += _paths(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


COMMANDS = _paths(typer.main.get_group(app))


def test_the_cli_has_the_documented_commands() -> None:
    tops = {path[0] for path in COMMANDS if path}
    for name in ("demo", "replay", "watch", "ingest", "project", "projections", "verify",
                 "db", "dead-letters", "broker", "jobs", "quotas", "prices", "billing",
                 "invoices", "report"):  # fmt: skip
        assert name in tops


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "dlc-ledger")
def test_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
