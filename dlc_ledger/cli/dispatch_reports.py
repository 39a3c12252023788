"""``report waits | preemptions | goodput``: what the dispatcher's decisions cost, from the
stored decision events and the read models (``projections/dispatch/reports.py``)."""

from __future__ import annotations

from typing import Annotated

import typer

from dlc_ledger.cli.options import CLUSTER, check_window, parse_optional_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.presenters import with_amounts
from dlc_ledger.wiring.context import open_reader
from projections.billing import currency_scales
from projections.dispatch import (
    GOODPUT_KEYS,
    DecisionWindow,
    goodput_report,
    preemptions_report,
    waits_report,
)

__all__ = ["report_goodput", "report_preemptions", "report_waits"]

_FROM = typer.Option(None, "--from", help=f"window start (inclusive): {CLUSTER}")
_TO = typer.Option(None, "--to", help=f"window end (exclusive): {CLUSTER}")
#: identifiers for machines; a table shows the names
_MACHINE_ONLY = ("preemptor_uid", "victim_uid", "event_id")


def _window(start: str | None, end: str | None) -> DecisionWindow:
    window = DecisionWindow(
        parse_optional_instant(start, option="--from"), parse_optional_instant(end, option="--to")
    )
    check_window(window.start, window.end)
    return window


def report_waits(
    start: str | None = _FROM, end: str | None = _TO, fmt: FormatOption = RowFormat.table
) -> None:
    """Waits from queued (submitted, or preempted: a requeue is a new wait) to admitted:
    count, p50/p95/max/mean seconds by quota and priority, for waits that ended in the
    window; ``waiting``: jobs still queued."""
    window = _window(start, end)
    store = open_reader()
    with store.reading() as conn:
        rows = waits_report(conn, window)
    emit_rows(rows, fmt)


def report_preemptions(
    start: str | None = _FROM, end: str | None = _TO, fmt: FormatOption = RowFormat.table
) -> None:
    """Every preemption decided in the window: preemptor, victim, reason, and the victim's
    GPU-hours lost (its pods open at the decision, as `jobs why` shows) with their cost at
    its rate."""
    window = _window(start, end)
    store = open_reader()
    with store.reading() as conn:
        rows = preemptions_report(conn, window)
        scale_of = currency_scales(conn)
    if fmt == RowFormat.table:
        rows = [{k: v for k, v in r.items() if k not in _MACHINE_ONLY} for r in rows]
    emit_rows(with_amounts(rows, fmt, scale_of), fmt)


def report_goodput(
    by: Annotated[
        str, typer.Option("--by", help=f"group by {' or '.join(GOODPUT_KEYS)}.")
    ] = "quota",
    start: str | None = _FROM,
    end: str | None = _TO,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Occupied time that ended in success over all occupied time (GPU-weighted and
    plain), for occupancies that ended in the window, by quota or workspace."""
    if by not in GOODPUT_KEYS:
        raise typer.BadParameter(f"use {' or '.join(GOODPUT_KEYS)}", param_hint="--by")
    window = _window(start, end)
    store = open_reader()
    with store.reading() as conn:
        rows = goodput_report(conn, by, window)  # type: ignore[arg-type]
    emit_rows(rows, fmt)
