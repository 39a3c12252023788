"""``dlc-ledger report usage`` and ``report cost``, and the table / JSON / CSV rendering
the billing commands share.

The reports themselves live in :mod:`projections.finance_reports`; this module
parses options, brings the billing projection up to date and prints rows.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import typer

from consumers.context import open_store
from consumers.projector import Projector
from ledger.canonical import parse_timestamp
from ledger.store.postgres import PostgresEventStore
from projections.billing import BillingProjection
from projections.finance_reports import ReportWindow, cost_report, parse_group_by, usage_report

__all__ = ["FORMAT_OPTION", "emit", "render", "report_cost", "report_usage", "sync_billing"]

FORMAT_OPTION: Any = typer.Option("table", "--format", help="table, json or csv")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def render(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    """Rows as an aligned text table, a JSON array or CSV with a header."""
    rows = [{k: _plain(v) for k, v in r.items()} for r in rows]
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "csv":
        out = io.StringIO()
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return out.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown --format {fmt!r}: use table, json or csv")
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]  # fmt: skip
    return "\n".join(lines)


def emit(rows: Sequence[dict[str, Any]], fmt: str) -> None:
    sys.stdout.write(render(rows, fmt) + "\n")


def sync_billing(store: PostgresEventStore) -> None:
    """Bring the billing projection to the store's head before reading it."""
    Projector(store, [BillingProjection()]).catch_up()


def _window(start: str | None, end: str | None, as_of: str | None) -> ReportWindow:
    return ReportWindow(
        start=parse_timestamp(start) if start else None,
        end=parse_timestamp(end) if end else None,
        as_of=parse_timestamp(as_of) if as_of else None,
    )


_GROUP = typer.Option("workspace", "--group-by", help="comma-separated: workspace, quota, "
                      "user, flavor, billing_mode, day, month, job")  # fmt: skip
_FROM = typer.Option(None, "--from", help="window start, cluster time (ISO-8601)")
_TO = typer.Option(None, "--to", help="window end (exclusive); open intervals count up to it")
_AS_OF = typer.Option(None, "--as-of", help="only what had been recorded by then (ISO-8601)")


def report_usage(
    group_by: str = _GROUP,
    start: str | None = _FROM,
    end: str | None = _TO,
    as_of: str | None = _AS_OF,
    fmt: str = FORMAT_OPTION,
) -> None:
    """Exact occupied usage (mGPU·s, CPU milli·s, MiB·s), grouped."""
    keys = parse_group_by(group_by)
    window = _window(start, end, as_of)
    store = open_store()
    sync_billing(store)
    with store.transaction() as uow:
        rows = usage_report(uow.connection, keys, window)
    emit(rows, fmt)


def report_cost(
    group_by: str = _GROUP,
    start: str | None = _FROM,
    end: str | None = _TO,
    as_of: str | None = _AS_OF,
    source: str = typer.Option(
        "auto", "--source", help="ledger (posted, per month), rated (from facts) or auto"
    ),
    fmt: str = FORMAT_OPTION,
) -> None:
    """Cost in minor units, grouped (from the ledger, or rated from the facts)."""
    keys = parse_group_by(group_by)
    if source not in ("auto", "ledger", "rated"):
        raise ValueError(f"unknown --source {source!r}: use auto, ledger or rated")
    window = _window(start, end, as_of)
    store = open_store()
    sync_billing(store)
    with store.transaction() as uow:
        rows = cost_report(uow.connection, keys, window, source=source)  # type: ignore[arg-type]
    emit(rows, fmt)
