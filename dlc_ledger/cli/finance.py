"""``dlc-ledger report usage`` and ``report cost``, and the table / JSON / CSV rendering
the billing commands share.

The reports themselves live in :mod:`projections.billing.reports`; this module
parses options and prints the rows (as projected: reads never project).
"""

from __future__ import annotations

import typer

from dlc_ledger.cli.options import AS_OF_HELP, CLUSTER, check_window, parse_optional_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.wiring.context import open_reader
from ledger.errors import Invalid
from projections.billing import (
    ReportWindow,
    cost_report,
    currency_scales,
    parse_group_by,
    usage_report,
)

__all__ = ["report_cost", "report_usage"]


def _window(start: str | None, end: str | None, as_of: str | None) -> ReportWindow:
    window = ReportWindow(
        start=parse_optional_instant(start, option="--from"),
        end=parse_optional_instant(end, option="--to"),
        as_of=parse_optional_instant(as_of, option="--as-of"),
    )
    check_window(window.start, window.end)
    return window


_GROUP = typer.Option("workspace", "--group-by", help="comma-separated: workspace, quota, "
                      "user, flavor, billing_mode, day, month, job, kind (training, service, "
                      "notebook), service")  # fmt: skip
_FROM = typer.Option(None, "--from", help=f"window start (inclusive): {CLUSTER}")
_TO = typer.Option(
    None, "--to", help=f"window end (exclusive; open intervals count up to it): {CLUSTER}"
)
_AS_OF = typer.Option(None, "--as-of", help=AS_OF_HELP)


def report_usage(
    group_by: str = _GROUP,
    start: str | None = _FROM,
    end: str | None = _TO,
    as_of: str | None = _AS_OF,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Exact occupied usage (mGPU·s, CPU milli·s, MiB·s), grouped."""
    keys = parse_group_by(group_by)
    window = _window(start, end, as_of)
    store = open_reader()
    with store.snapshot() as uow:
        rows = usage_report(uow.connection, keys, window)
    emit_rows(rows, fmt)


def report_cost(
    group_by: str = _GROUP,
    start: str | None = _FROM,
    end: str | None = _TO,
    as_of: str | None = _AS_OF,
    source: str = typer.Option(
        "auto", "--source", help="ledger (posted, per month), rated (from facts) or auto"
    ),
    net_credits: bool = typer.Option(
        False,
        "--net-credits",
        help="add credited and net (cost - credit notes of each workspace x month's "
        "invoices); group by workspace and/or month only",
    ),
    with_prepaid: bool = typer.Option(
        False,
        "--with-prepaid",
        help="add prepaid: what the workspaces' subscriptions cost in the window (their "
        "recognised revenue attributed by guarantee, docs/subscriptions.md); group by "
        "workspace, quota and/or month only",
    ),
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Cost, grouped (from the ledger, or rated from the facts): minor units, currency,
    scale and the decimal amount."""
    keys = parse_group_by(group_by)
    if source not in ("auto", "ledger", "rated"):
        raise Invalid(f"unknown --source {source!r}: use auto, ledger or rated")
    window = _window(start, end, as_of)
    if with_prepaid:
        from dlc_ledger.services.subscriptions import check_keys

        check_keys(keys)
    store = open_reader()
    with store.snapshot() as uow:
        rows = cost_report(
            uow.connection,
            keys,
            window,
            source=source,  # type: ignore[arg-type]
            net_credits=net_credits,
        )
        scale_of = currency_scales(uow.connection)
    if with_prepaid:
        from dlc_ledger.services.subscriptions import add_prepaid

        rows = add_prepaid(store, rows, keys, window)
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)
