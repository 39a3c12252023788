"""Command groups that import a command's module only when the command is looked up.

Each command module imports what its work needs (SQLAlchemy and Alembic, kafka-python,
the Kubernetes client). Importing every module up front made every ``dlc-ledger``
call pay for all of them: ~1.8 s of imports before anything ran, against 1.0-1.4 s for any
single command. A group lists its commands as ``"module:attribute"`` targets; the
attribute is a Typer app (a sub-group) or a command function. A group's ``--help``
lists each command with the one-line summary the group was given, so it imports none of
them either (a group without summaries imports them to read their help texts).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # typer vendors click (0.29+); its groups take and return these classes
    from typer._click import Command, Context, HelpFormatter

__all__ = ["LazyGroup", "lazy_group", "load_command"]


class LazyGroup(TyperGroup):
    """A Typer group with commands imported on first lookup (``lazy``: name → target)."""

    lazy: ClassVar[Mapping[str, str]] = {}
    summaries: ClassVar[Mapping[str, str]] = {}
    _listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        # eagerly registered commands first, then the lazy ones in their listed order
        eager = [name for name in super().list_commands(ctx) if name not in self.lazy]
        return [*eager, *self.lazy]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            if self._listing and cmd_name in self.summaries:
                # the help page needs a name and a line, not the command's imports
                return TyperCommand(cmd_name, help=self.summaries[cmd_name])
            self.commands[cmd_name] = load_command(cmd_name, self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def load_command(name: str, target: str) -> Command:
    """The click command ``name`` for ``"module:attribute"`` (a Typer app or a function)."""
    module, _, attribute = target.partition(":")
    found = getattr(import_module(module), attribute)
    command: Command
    if isinstance(found, typer.Typer):
        command = typer.main.get_group(found)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(found)
        command = typer.main.get_command(single)
    command.name = name
    return command


def lazy_group(
    commands: Mapping[str, str], summaries: Mapping[str, str] | None = None
) -> type[LazyGroup]:
    """A :class:`LazyGroup` subclass for ``commands`` (Typer takes a group *class*), listing
    them in its help with ``summaries`` (name -> one line)."""
    return type(
        "LazyGroup", (LazyGroup,), {"lazy": dict(commands), "summaries": dict(summaries or {})}
    )
