"""``report subscriptions``: are we using what we pay for? (docs/subscriptions.md)"""

from __future__ import annotations

from typing import Annotated

import typer

from dlc_ledger.cli.options import CLUSTER, check_window, parse_optional_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.subscriptions import GROUP_BY, subscription_report, subscriptions
from dlc_ledger.wiring.context import open_reader
from ledger.canonical import format_timestamp
from projections.billing import currency_scales

__all__ = ["report_subscriptions"]


def report_subscriptions(
    group_by: Annotated[
        str, typer.Option("--group-by", help=f"one of {', '.join(GROUP_BY)}.")
    ] = "group",
    start: Annotated[
        str | None,
        typer.Option("--from", help=f"window start (default: the first subscription's): {CLUSTER}"),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--to", help=f"window end (default: the cluster clock): {CLUSTER}"),
    ] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Subscribed GPU-hours vs used by the quotas' own jobs, lent to idle-mode jobs of
    others (and what they paid), idle; cost and cost per used GPU-hour; by quota or
    workspace, each group's cost shown back by guarantee and by use."""
    if group_by not in GROUP_BY:
        raise typer.BadParameter(f"use one of {', '.join(GROUP_BY)}", param_hint="--group-by")
    store = open_reader()
    lo = parse_optional_instant(start, option="--from")
    hi = parse_optional_instant(end, option="--to")
    check_window(lo, hi)
    if lo is None:
        subs = subscriptions(store)
        lo = subs[0].starts_at if subs else billing_instant(store, None).at
    if hi is None:
        hi = billing_instant(store, None).at
    rows = subscription_report(store, group_by, lo, hi)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    if fmt is RowFormat.table:
        typer.echo(f"from {format_timestamp(lo)} to {format_timestamp(hi)}")
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)
