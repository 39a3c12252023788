"""``dlc-ledger subscriptions``: buy nodes into resource groups by the month or year.

``purchase`` bills the term in full at order time (into deferred revenue, recognised day
by day); ``renew`` orders the next term by hand (auto-renewal does it 3 days before
expiry on the billing tick); ``cancel`` ends it at the end of the term, or
``--immediately`` with a refund. Rules and examples: docs/subscriptions.md.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from dlc_ledger.cli.options import CLUSTER, parse_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.subscriptions import (
    cancel,
    find_subscription,
    purchase,
    renew,
    subscription_row,
    subscriptions,
    term_rows,
)
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp
from ledger.money import format_minor
from ledger.subscriptions import Subscription
from projections.billing import currency_scales

__all__ = ["subscriptions_app"]


class TermUnit(StrEnum):
    month = "month"
    year = "year"


subscriptions_app = typer.Typer(
    help="Subscriptions: nodes bought into resource groups by the month or year.",
    no_args_is_help=True,
)

_AT = f"The order instant (default: now, or a replayed cluster's clock): {CLUSTER}."
AtOption = Annotated[str | None, typer.Option("--at", help=_AT)]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print what would be ordered; append nothing.")
]


def _summary(sub: Subscription, verb: str) -> str:
    term = sub.last_term
    money = format_minor(term.amount_minor, sub.scale, sub.currency)
    return (
        f"{verb} {sub.subscription_id}: {sub.nodes} x {sub.spec} in {sub.group} for "
        f"{sub.workspace}, term {term.term} ({term.unit}) {format_timestamp(term.starts_at)} "
        f"to {format_timestamp(term.ends_at)}, {money} billed into deferred revenue"
    )


@subscriptions_app.command("purchase")
def purchase_command(
    group: Annotated[str, typer.Option("--group", help="The resource group the nodes join.")],
    spec: Annotated[str, typer.Option("--spec", help="A node spec of the price book.")],
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="How many nodes.")],
    term: Annotated[TermUnit, typer.Option("--term", help="month or year.")],
    workspace: Annotated[str, typer.Option("--workspace", help="The workspace that pays.")],
    auto_renew: Annotated[
        bool, typer.Option("--auto-renew", help="Renew 3 days before each term ends.")
    ] = False,
    at: AtOption = None,
    key: Annotated[
        str | None,
        typer.Option("--key", help="Idempotency key: a repeat returns the same subscription."),
    ] = None,
    dry_run: DryRun = False,
    allow_unknown_workspace: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-workspace",
            help="Accept a workspace no quota binds and no job ran in yet.",
        ),
    ] = False,
) -> None:
    """Buy NODES nodes of SPEC into GROUP for a month or a year, billed in full now."""
    store = context.open_store()
    order = purchase(
        store,
        group=group,
        spec=spec,
        nodes=nodes,
        term=term.value,
        workspace=workspace,
        principal=context.local_principal(),
        auto_renew=auto_renew,
        at=parse_instant(at, option="--at") if at else None,
        key=key,
        dry_run=dry_run,
        known_only=not allow_unknown_workspace,
    )
    verb = "would buy" if order.dry_run else ("bought" if order.created else "already bought")
    typer.echo(_summary(order.subscription, verb))


@subscriptions_app.command("renew")
def renew_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription to renew.")],
    at: AtOption = None,
    dry_run: DryRun = False,
) -> None:
    """Order the next term now, at today's price; it starts when the current one ends."""
    store = context.open_store()
    order = renew(
        store,
        subscription_id,
        principal=context.local_principal(),
        at=parse_instant(at, option="--at") if at else None,
        dry_run=dry_run,
    )
    typer.echo(_summary(order.subscription, "would renew" if order.dry_run else "renewed"))


@subscriptions_app.command("cancel")
def cancel_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription to cancel.")],
    immediately: Annotated[
        bool,
        typer.Option(
            "--immediately",
            help="End it now, with the refund rule (default: at the end of the term, no refund).",
        ),
    ] = False,
    at: AtOption = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept on the event).")] = "",
    dry_run: DryRun = False,
) -> None:
    """Unsubscribe, at the end of the term or --immediately (refund: docs/subscriptions.md)."""
    store = context.open_store()
    done = cancel(
        store,
        subscription_id,
        principal=context.local_principal(),
        immediately=immediately,
        at=parse_instant(at, option="--at") if at else None,
        reason=reason,
        dry_run=dry_run,
    )
    sub = done.subscription
    refund = format_minor(done.refund.amount_minor, sub.scale, sub.currency)
    verb = "would cancel" if done.dry_run else "cancelled"
    typer.echo(
        f"{verb} {sub.subscription_id}: capacity ends {format_timestamp(sub.ends_at)}, "
        f"refund {refund} ({done.refund.rule})"
    )


def _instant(at: str | None) -> Any:
    store = context.open_reader()
    return store, (parse_instant(at, option="--at") if at else billing_instant(store, None).at)


@subscriptions_app.command("list")
def list_command(
    at: Annotated[str | None, typer.Option("--at", help=f"Status as of: {CLUSTER}.")] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Every subscription: group, spec, nodes, payer, term, status, price, paid, refunded."""
    store, when = _instant(at)
    rows = [subscription_row(s, when) for s in subscriptions(store)]
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    if fmt is RowFormat.table:
        typer.echo(f"at {format_timestamp(when)}: {len(rows)} subscription(s)")
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)


@subscriptions_app.command("show")
def show_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription.")],
    at: Annotated[str | None, typer.Option("--at", help=f"Status as of: {CLUSTER}.")] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """One subscription and its terms (each at the price locked when it was ordered)."""
    store, when = _instant(at)
    sub = find_subscription(store, subscription_id)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    row = subscription_row(sub, when)
    if sub.cancelled is not None:
        row["cancelled"] = f"{sub.cancelled.mode} at {format_timestamp(sub.cancelled.effective_at)}"
        row["refund_rule"] = sub.cancelled.rule
    if fmt is not RowFormat.table:
        emit_rows(with_amounts([row], fmt, scale_of), fmt)
        return
    for key, value in with_amounts([row], fmt, scale_of)[0].items():
        typer.echo(f"{key:>16}: {value}")
    typer.echo("")
    emit_rows(with_amounts(term_rows(sub), fmt, scale_of), fmt)
