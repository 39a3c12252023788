"""``dlc-ledger queue show QUOTA``: a quota's pending jobs in the order the dispatcher
tries them, and ``report estimates``: how good the start estimates it stored were.

Both read projected state (caught up first) and the stored decision events; the
explanations come from the decision core itself (docs/dispatch.md, "Why?").
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    check_window,
    parse_instant,
    print_next_cursor,
)
from dlc_ledger.cli.tables import FormatOption, RowFormat, cell, emit_rows
from dlc_ledger.services.dispatch import estimates_report, queue_page
from dlc_ledger.wiring import context

__all__ = ["queue_app", "report_estimates"]

queue_app = typer.Typer(help="Pending queues, in the dispatcher's order.", no_args_is_help=True)

_COLUMNS = ("position", "cohort_position", "job_uid", "name", "quota", "priority",
            "effective_priority", "queued_at", "waited_seconds", "reason", "request",
            "estimated_start", "estimated_start_low", "estimated_start_high",
            "estimate_basis")  # fmt: skip


def _request_text(request: dict[str, Any]) -> str:
    return ", ".join(f"{k}={cell(v)}" for k, v in sorted(request.items())) or "-"


@queue_app.command("show")
def queue_show(
    quota: Annotated[str, typer.Argument(help="A leaf quota, or an inner one: its subtree.")],
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="As at this instant: the jobs pending and admitted then, their waits, "
            f"aging and estimates. Default: the latest projected instant. {CLUSTER}.",
        ),
    ] = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Pending jobs in policy order: position in their quota and in the whole tree,
    priority (effective, if aged), time waited, reason, request, estimated start and range."""
    instant = parse_instant(at, option="--at") if at else None
    page = queue_page(context.open_reader(), quota, at=instant, limit=limit, cursor=cursor)
    rows = [{c: row[c] for c in _COLUMNS} for row in page.rows]
    if fmt is not RowFormat.json:  # one cell per key in a table or CSV
        for row in rows:
            row["request"] = _request_text(row["request"])
            row["waited_seconds"] = round(row["waited_seconds"])
    emit_rows(rows, fmt.value)
    print_next_cursor(page.next_cursor)


def report_estimates(
    since: Annotated[
        str | None, typer.Option("--from", help=f"Admitted from (inclusive): {CLUSTER}.")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help=f"Admitted before (exclusive): {CLUSTER}.")
    ] = None,
    per_job: Annotated[
        bool, typer.Option("--per-job", help="One row per waiting episode, not per quota.")
    ] = False,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Start estimates against actual starts: for each wait, the first estimate and range
    stored with a pending decision vs its admission; waits, estimated, absolute error
    p50 / p95 / mean and mean error in seconds, and the range's calibration: how many
    waits had one and the shares that started inside, below and above it, per quota."""
    start = parse_instant(since, option="--from") if since else None
    end = parse_instant(until, option="--to") if until else None
    check_window(start, end)
    rows = estimates_report(context.open_reader(), start=start, end=end, per_job=per_job)
    emit_rows(rows, fmt.value)
