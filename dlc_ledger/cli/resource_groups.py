"""``dlc-ledger resource-groups list|show``: subscribed vs delivered nodes, capacity, and
the quotas that draw on each group (docs/subscriptions.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dlc_ledger.cli.options import CLUSTER, parse_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.subscriptions import ResourceGroup, resource_group, resource_groups
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp

__all__ = ["resource_groups_app"]

resource_groups_app = typer.Typer(
    help="Resource groups: subscribed and delivered nodes, capacity, quotas.",
    no_args_is_help=True,
)
AtOption = Annotated[str | None, typer.Option("--at", help=f"As of: {CLUSTER}.")]


def _row(group: ResourceGroup) -> dict[str, Any]:
    return {
        "group": group.group,
        "spec": group.spec or "",
        "subscribed_nodes": group.subscribed_nodes,
        "delivered_nodes": group.delivered_nodes,
        "capacity": ", ".join(f"{k}={v:,}" for k, v in sorted(group.capacity.items())),
        "quotas": ", ".join(group.quotas),
        "subscriptions": ", ".join(group.subscriptions),
    }


@resource_groups_app.command("list")
def list_command(at: AtOption = None, fmt: FormatOption = RowFormat.table) -> None:
    """Every group: spec, subscribed nodes, delivered nodes, capacity per flavor, quotas."""
    store = context.open_reader()
    when = parse_instant(at, option="--at") if at else billing_instant(store, None).at
    rows = [_row(g) for g in resource_groups(store, when)]
    if fmt is RowFormat.table:
        typer.echo(f"at {format_timestamp(when)} (capacity in mGPU, milli-cores, MiB)")
    emit_rows(rows, fmt)


@resource_groups_app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="The resource group.")],
    at: AtOption = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """One group, as in list."""
    store = context.open_reader()
    when = parse_instant(at, option="--at") if at else billing_instant(store, None).at
    row = _row(resource_group(store, name, when))
    if fmt is not RowFormat.table:
        emit_rows([row], fmt)
        return
    for key, value in row.items():
        typer.echo(f"{key:>16}: {value}")
