"""``dlc-ledger subscriptions``: buy nodes into resource groups by the month or year.

``purchase`` bills the term in full at order time (into deferred revenue, recognised day
by day); ``renew`` orders the next term by hand (auto-renewal does it 3 days before
expiry on the billing tick); ``cancel`` ends it at the end of the term, or
``--immediately`` with a refund; ``add-nodes``, ``change`` and ``change-spec`` change a
running one (docs/subscriptions.md "Changing a subscription"). Rules and examples:
docs/subscriptions.md.
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
    add_subscription_nodes,
    cancel,
    change_rows,
    change_spec,
    find_subscription,
    purchase,
    renew,
    schedule_subscription_nodes,
    subscription_row,
    subscriptions,
    term_credits,
    term_rows,
)
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp
from ledger.errors import Invalid
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
    """One subscription and its terms (each at the price locked when it was ordered, with
    its SLA credit: credited, pending or none, undelivered node-hours, amount)."""
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
    credits = term_credits(store, sub.subscription_id, when)
    emit_rows(with_amounts(term_rows(sub, credits), fmt, scale_of), fmt)
    changes = change_rows(sub)
    if changes:
        typer.echo("")
        typer.echo("changes:")
        emit_rows(with_amounts(changes, fmt, scale_of), fmt)


KeyOption = Annotated[
    str,
    typer.Option(
        "--key", help="Idempotency key: a retry adds nothing; another request under it is refused."
    ),
]


def _added(sub: Subscription, verb: str, nodes: int, amount: int, detail: str) -> str:
    money = format_minor(amount, sub.scale, sub.currency)
    return (
        f"{verb} {nodes} node(s) to {sub.subscription_id} ({sub.spec} in {sub.group}): {detail}, "
        f"{money} billed into deferred revenue"
    )


def _add_nodes(subscription_id: str, nodes: int, at: str | None, key: str, dry_run: bool) -> None:
    store = context.open_store()
    done = add_subscription_nodes(
        store,
        subscription_id,
        nodes=nodes,
        key=key,
        principal=context.local_principal(),
        at=parse_instant(at, option="--at") if at else None,
        dry_run=dry_run,
    )
    added = done.added
    verb = "would add" if done.dry_run else ("added" if done.created else "already added")
    detail = (
        f"from {format_timestamp(added.part.starts_at)} to {format_timestamp(added.part.ends_at)}"
        f" (term {added.part.term}, {added.days} of {added.term_days} day(s), "
        f"{added.nodes_after} node(s) from then)"
    )
    typer.echo(_added(done.subscription, verb, added.nodes, added.part.amount_minor, detail))


@subscriptions_app.command("add-nodes")
def add_nodes_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription.")],
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="How many nodes to add.")],
    key: KeyOption,
    at: AtOption = None,
    dry_run: DryRun = False,
) -> None:
    """Add NODES nodes from --at to the end of the running term, charged by started day
    at the term's locked price; the group's capacity grows at --at."""
    _add_nodes(subscription_id, nodes, at, key, dry_run)


@subscriptions_app.command("change")
def change_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription.")],
    nodes: Annotated[
        str,
        typer.Option(
            "--nodes",
            help="+N: add N nodes now (mid-term, needs --key); M with --at-renewal: order "
            "the next term with M nodes.",
        ),
    ],
    at_renewal: Annotated[
        bool,
        typer.Option("--at-renewal", help="Apply the count when the next term is ordered."),
    ] = False,
    at: AtOption = None,
    key: Annotated[
        str | None,
        typer.Option("--key", help="Idempotency key (required to add nodes)."),
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Change the node count: +N now (as add-nodes), or M from the next renewal."""
    text = nodes.strip()
    try:
        count = int(text)
    except ValueError:
        raise Invalid(
            f"--nodes takes +N (add) or M (the count at renewal), got {nodes!r}"
        ) from None
    if text.startswith("+"):
        if at_renewal:
            raise Invalid("--nodes +N adds nodes now: drop --at-renewal, or give M")
        if key is None:
            raise Invalid("adding nodes needs --key (a retry must not add twice)")
        _add_nodes(subscription_id, count, at, key, dry_run)
        return
    if not at_renewal:
        raise Invalid(
            "a running term's nodes can only grow (--nodes +N): removing nodes mid-term is "
            "not refunded by the refund rule, so a new count takes effect at the renewal "
            "(--nodes M --at-renewal), or cancel the subscription"
        )
    store = context.open_store()
    done = schedule_subscription_nodes(
        store,
        subscription_id,
        nodes=count,
        principal=context.local_principal(),
        key=key,
        at=parse_instant(at, option="--at") if at else None,
        dry_run=dry_run,
    )
    verb = (
        "would schedule" if done.dry_run else ("scheduled" if done.created else "already scheduled")
    )
    sub = done.subscription
    typer.echo(
        f"{verb} {done.change.nodes} node(s) for {sub.subscription_id} from term "
        f"{done.change.from_term} (starting {format_timestamp(sub.last_term.ends_at)} when "
        f"renewed; {sub.nodes} node(s) until then)"
    )


@subscriptions_app.command("change-spec")
def change_spec_command(
    subscription_id: Annotated[str, typer.Argument(help="The subscription to replace.")],
    spec: Annotated[str, typer.Option("--spec", help="The node spec to move to.")],
    key: KeyOption,
    group: Annotated[
        str | None,
        typer.Option("--group", help="The group of the new nodes (default: the one holding SPEC)."),
    ] = None,
    nodes: Annotated[
        int | None, typer.Option("--nodes", min=1, help="Nodes of the new spec (default: as now).")
    ] = None,
    at: AtOption = None,
    dry_run: DryRun = False,
) -> None:
    """Move to another spec: a new subscription at the price in force and this one
    cancelled immediately with its refund, in one transaction."""
    store = context.open_store()
    done = change_spec(
        store,
        subscription_id,
        spec=spec,
        key=key,
        principal=context.local_principal(),
        group=group,
        nodes=nodes,
        at=parse_instant(at, option="--at") if at else None,
        dry_run=dry_run,
    )
    old, new = done.old, done.new
    verb = "would change" if done.dry_run else ("changed" if done.created else "already changed")
    refund = (
        format_minor(done.refund.amount_minor, old.scale, old.currency)
        if done.refund is not None
        else format_minor(
            old.cancelled.refund_minor if old.cancelled else 0, old.scale, old.currency
        )
    )
    typer.echo(
        f"{verb} {old.subscription_id} ({old.spec} in {old.group}) to {new.subscription_id}: "
        f"{_summary(new, 'bought').removeprefix('bought ' + new.subscription_id + ': ')}; "
        f"{old.subscription_id} cancelled at {format_timestamp(done.change.effective_at)}, "
        f"refund {refund}"
    )
