"""What an apply (``quotas``, ``budgets``, ``notifications apply``) prints: a line per
change, with the event, stream and instant under ``--dry-run``, and a count."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from ledger.canonical import format_timestamp
from ledger.envelopes import Envelope

__all__ = ["echo_applied"]


def echo_applied(lines: Sequence[str], events: Sequence[Envelope], *, dry_run: bool) -> None:
    if not lines:
        typer.echo("no changes")
        return
    for line, envelope in zip(lines, events, strict=True):
        if dry_run:
            typer.echo(
                f"would append {envelope.type} to {envelope.stream} at "
                f"{format_timestamp(envelope.occurred_at)}: {line}"
            )
        else:
            typer.echo(line)
    typer.echo(
        f"would apply {len(lines)} change(s); appended nothing (--dry-run)"
        if dry_run
        else f"applied {len(lines)} change(s)"
    )
