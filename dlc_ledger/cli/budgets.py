"""``dlc-ledger budgets apply|show|check``: spending limits per workspace and month.

``apply`` diffs a YAML file against the budgets as applied and appends only the
differences (idempotent, like ``quotas apply``; a workspace the file leaves out has its
budget removed). ``show`` lists each budget in force with what the workspace spent in
the period; ``check`` stores a ``BudgetExceeded`` for each budget crossed (the
dispatcher does this every cycle). Format and rules: docs/billing.md, "Budgets".
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dlc_ledger.cli.applies import echo_applied
from dlc_ledger.cli.options import CLUSTER, EffectiveAtOption, parse_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.services.budgets import apply_budget_file, budget_statuses, check, default_instant
from dlc_ledger.services.quotas import lands_inside_history
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp
from projections.billing import currency_scales

__all__ = ["budgets_app"]

budgets_app = typer.Typer(
    help="Budgets per workspace and month: apply a YAML file, show, check.",
    no_args_is_help=True,
)

_AT_HELP = (
    "The instant (default: now, or the cluster clock of a replayed history, as billing "
    f"runs): {CLUSTER}."
)


@budgets_app.command("apply")
def apply(
    file: Annotated[
        Path,
        typer.Argument(
            help="Budget YAML: budgets: [{workspace, amount, currency, period: month, "
            "action: notify|stop}]."
        ),
    ],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the events that would be appended, append none."),
    ] = False,
    at: EffectiveAtOption = None,
    allow_unknown_workspace: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-workspace",
            help="Accept a budget for a workspace no quota binds and no job ran in yet.",
        ),
    ] = False,
) -> None:
    """Make the budgets match FILE: append only the differences (idempotent)."""
    try:
        text = file.read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from exc
    store = context.open_store()
    when = parse_instant(at, option="--effective-at") if at else None
    result = apply_budget_file(
        store,
        text,
        principal=context.local_principal(),
        at=when,
        dry_run=dry_run,
        known_only=not allow_unknown_workspace,
    )
    if when is None and result.events:
        warning = lands_inside_history(store, result.events[0].occurred_at)
        if warning:
            typer.echo(warning, err=True)
    echo_applied(result.lines, result.events, dry_run=dry_run)


@budgets_app.command("show")
def show(
    at: Annotated[str | None, typer.Option("--at", help=_AT_HELP)] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Per workspace: budget, spent this period, remaining, action, state, exhausted.

    Spent is the posted cost of the period (a calendar month in UTC) up to the instant;
    state is ok or exceeded; exhausted: a stop budget's crossing is stored, so the
    dispatcher admits nothing new of the workspace and suspends its pay-as-you-go jobs."""
    store = context.open_reader()
    when = parse_instant(at, option="--at") if at else default_instant(store)
    rows: list[dict[str, Any]] = [
        {
            "workspace": s.workspace,
            "period": s.period,
            "budget_minor": s.budget_minor,
            "spent_minor": s.spent_minor,
            "remaining_minor": s.remaining_minor,
            "currency": s.currency,
            "action": s.action,
            "state": s.state,
            "exhausted": s.exhausted,
        }
        for s in budget_statuses(store, when)
    ]
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    if fmt is RowFormat.table:
        typer.echo(f"at {format_timestamp(when)}")
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)


@budgets_app.command("check")
def check_command(
    at: Annotated[str | None, typer.Option("--at", help=_AT_HELP)] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Store a BudgetExceeded for each budget crossed by posted cost, once.

    Each crossing is stored once per budget and period with a notification to the
    workspace; checking again stores nothing new (the dispatcher checks every cycle)."""
    store = context.open_store()
    when = parse_instant(at, option="--at") if at else default_instant(store)
    breaches = check(store, when, source=context.local_principal())
    rows: list[dict[str, Any]] = [
        {
            "workspace": b.workspace,
            "period": b.period,
            "budget_minor": b.budget_minor,
            "spent_minor": b.spent_minor,
            "currency": b.currency,
            "action": b.action,
            "crossed_at": format_timestamp(b.at),
            "event_id": str(b.event_id),
        }
        for b in breaches
    ]
    if fmt is RowFormat.table:
        typer.echo(
            f"{len(rows)} budget(s) newly exceeded at {format_timestamp(when)}"
            if rows
            else f"no budget newly exceeded at {format_timestamp(when)}"
        )
        if not rows:
            return
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)
