"""``dlc-ledger billing run|close|periods|serve`` and ``dlc-ledger invoices list|show|void|credit``.

Options in, rows out: the rules (when a run may bill, what a void reverses, when a
credit note is refused or is a repeat) are the use cases' in
:mod:`dlc_ledger.services.billing` (the tick, an invoice's corrections) and
:mod:`~dlc_ledger.services.clocks`; an invoice read is :mod:`projections.billing`'s.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import typer

from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    parse_instant,
    parse_period,
    print_next_cursor,
    require_known,
)
from dlc_ledger.cli.tables import (
    DocumentFormat,
    DocumentFormatOption,
    FormatOption,
    RowFormat,
    emit_rows,
    escape_controls,
)
from dlc_ledger.presenters import with_amounts
from dlc_ledger.services.billing import (
    close_month,
    issue_credit_note,
    list_periods,
    tick,
    void_invoice,
)
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.wiring.context import open_reader, open_store
from ledger.canonical import format_timestamp
from ledger.money import format_minor
from processes.billing import DEFAULT_GRACE, TickResult
from projections.billing import (
    credit_note_page,
    currency_scales,
    find_invoice,
    invoice_detail,
    invoice_page,
)
from projections.names import billing_workspaces, invoice_periods

__all__ = ["billing_app", "invoices_app"]

billing_app = typer.Typer(help="Rating, accrual and period close.", no_args_is_help=True)
invoices_app = typer.Typer(help="Invoices and credit notes.", no_args_is_help=True)

SOURCE = "api/invoices-cli"  # the principal of voids and credit notes made here


def _tick_summary(result: TickResult) -> dict[str, Any]:
    """What one tick appended, by kind: rating transactions, the subscriptions' renewals,
    expiries, days recognised and SLA credits, the invoices issued (each with its
    rounding)."""
    r = result.rated
    return {
        "accrued_to": format_timestamp(result.accrued_to),
        "finals": r.finals,
        "accrued": r.accrued,
        "rating_transactions": r.posted,
        "unrateable": r.unrateable,
        "renewed": result.renewed,
        "renewal_failures": result.renewal_failures,
        "expired": result.expired,
        "recognised_days": result.recognised,
        "sla_assessed": result.sla_assessed,
        "sla_credited_minor": result.sla_credited_minor,
        "invoices": list(result.invoices),
        "returned_to_credit": list(result.returned),
        "credits_applied": list(result.credits_applied),
        "overdue": list(result.overdue),
    }


def _print_tick(result: TickResult) -> None:
    r = result.rated
    typer.echo(
        f"rated {r.finals} ended occupancies, accrued {r.accrued} open ones to "
        f"{result.accrued_to.isoformat()}: posted {r.posted} rating transactions, "
        f"{r.unrateable} unrateable; subscriptions: renewed {result.renewed} "
        f"({result.renewal_failures} renewals failed), expired {result.expired}, "
        f"recognised {result.recognised} days, {result.sla_assessed} terms assessed for SLA "
        f"credits; issued {len(result.invoices)} invoices"
    )


@billing_app.command("run")
def run(
    until: str | None = typer.Option(
        None,
        "--until",
        help="bill up to this instant (default: the wall clock, or the latest cluster time "
        f"observed when that lags it by more than a period or runs ahead of it, as in a "
        f"replay): {CLUSTER}",
    ),
    grace_hours: float = typer.Option(
        DEFAULT_GRACE.total_seconds() / 3600,
        "--grace-hours",
        min=0,
        help="hours after a period's end before its invoices are issued (>= 0)",
    ),
    force: bool = typer.Option(
        False, "--force", help="allow an --until beyond the latest cluster time observed"
    ),
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """Run the subscriptions' renewals, expiries and recognition due, the rater and one
    scheduler tick, then exit; say what each part booked."""
    store = open_store()
    asked = parse_instant(until, option="--until") if until else None
    chosen = billing_instant(store, asked, force=force)
    if chosen.replayed:
        typer.echo(
            f"the cluster clock is not the wall clock (a replay?): billing up to the latest "
            f"cluster time observed, {format_timestamp(chosen.at)} (pass --until to choose)",
            err=True,
        )
    result = tick(store, chosen.at, grace=timedelta(hours=grace_hours))
    if fmt is DocumentFormat.json:
        typer.echo(_json({"until": format_timestamp(chosen.at), **_tick_summary(result)}))
    else:
        _print_tick(result)
        _print_receivables(result)


def _print_receivables(result: TickResult) -> None:
    """What the tick did with the receivables (docs/finance.md, "Payments and receivables"),
    when it did anything."""
    if result.returned or result.credits_applied or result.overdue:
        typer.echo(
            f"returned {len(result.returned)} over-settled invoices' excess to credit "
            f"balances; applied {len(result.credits_applied)} credit balances to open invoices; "
            f"{len(result.overdue)} invoices overdue"
        )


@billing_app.command("close")
def close_cmd(
    period: str = typer.Option(..., "--period", help="The month to close, YYYY-MM."),
    at: str | None = typer.Option(
        None, "--at", help=f"close at this instant (default: as billing run's): {CLUSTER}"
    ),
    reason: str = typer.Option("", "--reason", help="Why (kept on the PeriodClosed)."),
    force: bool = typer.Option(
        False, "--force", help="allow an --at beyond the latest cluster time observed"
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="say what the close would lock and issue; append nothing"
    ),
) -> None:
    """Close (lock) a month for every workspace after one billing tick, and issue its
    invoices at once: a posting dated into it later is booked into the earliest open month
    as an adjustment naming its dates (docs/finance.md, Period locks)."""
    store = open_store()
    when = parse_instant(at, option="--at") if at else None
    done = close_month(store, parse_period(period), principal=SOURCE, at=when, force=force,
                       reason=reason, dry_run=dry_run)  # fmt: skip
    if dry_run:
        state = "would close" if done.closed else "is closed already"
        typer.echo(
            f"period {done.period} {state} (dry run, nothing appended): "
            f"{len(done.workspaces)} workspaces posted to it, {len(done.invoices)} invoices due "
            "before the close's billing run"
        )
        return
    state = "closed" if done.closed else "already closed"
    typer.echo(f"period {done.period} {state}; issued {len(done.invoices)} invoices")


@billing_app.command("periods")
def periods_cmd(fmt: FormatOption = RowFormat.table) -> None:
    """Every month with postings, invoices or a close: locked (closed for every workspace)
    or open, how many workspaces posted to it, its issued invoices, who closed it and when."""
    emit_rows(list_periods(open_reader()), fmt)


@billing_app.command("serve")
def serve_cmd(
    interval_seconds: float = typer.Option(60.0, "--interval-seconds"),
    grace_hours: float = typer.Option(
        DEFAULT_GRACE.total_seconds() / 3600, "--grace-hours", min=0, help="(>= 0)"
    ),
    metrics_port: int = typer.Option(
        0, "--metrics-port", help="Serve Prometheus /metrics on this port, 0 = off."
    ),
    clock: str = typer.Option(
        "wall",
        "--clock",
        help="wall: tick at the wall clock; cluster: at the latest cluster time the store "
        "has seen (a replayed cluster, as `up` on kubesim; no tick before any fact)",
    ),
) -> None:
    """Run the rater and ticks under APScheduler until interrupted, on the wall clock or
    (--clock cluster) on the cluster time the store has seen."""
    from consumers.billing_scheduler import serve
    from consumers.metrics import serve_metrics
    from dlc_ledger.services.clocks import observed_cluster_time
    from dlc_ledger.wiring import context
    from dlc_ledger.wiring.signals import stop_on_signals

    if clock not in ("wall", "cluster"):
        raise typer.BadParameter("wall or cluster", param_hint="--clock")
    serve_metrics(metrics_port or context.settings().metrics_port)
    store = open_store()
    stop = threading.Event()
    stop_on_signals(stop)  # SIGTERM (a pod's stop): the tick in hand finishes first
    try:
        serve(
            store,
            stop,
            interval=timedelta(seconds=interval_seconds),
            grace=timedelta(hours=grace_hours),
            on_tick=_print_tick,
            clock=(lambda: observed_cluster_time(store)) if clock == "cluster" else None,
        )
    except KeyboardInterrupt:
        stop.set()


# --- invoices -----------------------------------------------------------------------


@invoices_app.command("list")
def list_invoices(
    workspace: str | None = typer.Option(None, "--workspace", help="Only this workspace."),
    period: str | None = typer.Option(None, "--period", help="Only this period, YYYY-MM."),
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Issued and voided invoices by period and workspace, a page at a time: issued_at is
    cluster time (the run's 'now'), recorded_at store time (when the ledger recorded it)."""
    period = parse_period(period) if period is not None else None
    store = open_reader()
    with store.reading() as conn:
        page = invoice_page(conn, workspace=workspace, period=period, limit=limit, cursor=cursor)
        if not page.rows and cursor is None:  # a typo in a name is an error, not "(no rows)"
            require_known("workspace", workspace, billing_workspaces(conn), option="--workspace")
            require_known("invoiced period", period, invoice_periods(conn), option="--period")
        scale_of = currency_scales(conn)
    emit_rows(with_amounts(page.rows, fmt, scale_of), fmt)
    print_next_cursor(page.next_cursor)


@invoices_app.command("show")
def show_invoice(
    invoice_id: str = typer.Argument(...), fmt: FormatOption = RowFormat.table
) -> None:
    """One invoice: header (total, credited, paid, open, payment status; its credit notes,
    payments and the credit applied to it) and lines (json: one object; csv/table: the
    lines). issued_at is cluster time, recorded_at store time."""
    store = open_reader()
    found = invoice_detail(store, invoice_id)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    detail = found.header
    currency = detail["currency"]
    lines = [
        {k: v for k, v in line.items() if k not in ("transaction_ids", "jobs")}
        for line in found.lines
    ]
    if fmt == "json":
        (header,) = with_amounts([detail], fmt, scale_of)
        header["lines"] = with_amounts(found.lines, fmt, scale_of, currency=currency)
        header["credit_notes"] = with_amounts(found.credit_notes, fmt, scale_of)
        header["payments"] = with_amounts(found.payments, fmt, scale_of)
        header["credit_applied"] = with_amounts(found.credit_applied, fmt, scale_of)
        header["returned_to_credit"] = with_amounts(found.returned_to_credit, fmt, scale_of)
        typer.echo(_json(header))
        return
    if fmt == "table":
        scale = scale_of(currency)
        total = format_minor(detail["total_minor"], scale, currency, grouped=True)
        credited = format_minor(detail["credited_minor"], scale, currency, grouped=True)
        paid = format_minor(detail["paid_minor"], scale, currency, grouped=True)
        applied = format_minor(detail["applied_minor"], scale, currency, grouped=True)
        owed = format_minor(detail["open_minor"], scale, currency, grouped=True)
        returned = format_minor(detail["returned_minor"], scale, currency, grouped=True)
        workspace = escape_controls(detail["workspace"])  # from the cluster's annotations
        typer.echo(
            f"invoice {detail['invoice_id']}  workspace {workspace}  period "
            f"{detail['period']}  {detail['payment_status']}  total {total}  credited "
            f"{credited}  paid {paid}  credit applied {applied}  returned to credit "
            f"{returned}  open {owed}\n"
            f"issued_at {detail['issued_at'].isoformat()} (cluster time)  recorded_at "
            f"{detail['recorded_at'].isoformat()} (store time)"
        )
        for p in found.payments:
            amount = format_minor(p["amount_minor"], scale, currency, grouped=True)
            typer.echo(
                f"payment {p['payment_id']}  {amount}  reference "
                f"{escape_controls(p['reference'])}  received {p['received_at'].isoformat()}"
            )
        for a in found.credit_applied:
            amount = format_minor(a["amount_minor"], scale, currency, grouped=True)
            typer.echo(f"credit applied {amount} from invoice {a['from_invoice_id']}")
    emit_rows(with_amounts(lines, fmt, scale_of, currency=currency), fmt)


def _json(detail: dict[str, Any]) -> str:
    import json
    from decimal import Decimal

    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, Decimal):
            return str(value)
        raise TypeError(type(value).__name__)

    return json.dumps(detail, indent=2, default=default)


@invoices_app.command("void")
def void(
    invoice_id: str = typer.Argument(...),
    reason: str = typer.Option(..., "--reason"),
) -> None:
    """Void an issued invoice (its period reopens; the next tick re-issues)."""
    void_invoice(open_store(), invoice_id, reason, principal=SOURCE)
    typer.echo(f"invoice {invoice_id} voided")


@invoices_app.command("credit")
def credit(
    invoice_id: str = typer.Argument(...),
    amount: str = typer.Option(
        ..., "--amount", help='currency units, e.g. "12.50" (no more decimals than the scale)'
    ),
    reason: str = typer.Option(..., "--reason"),
    idempotency_key: str | None = typer.Option(
        None,
        "--idempotency-key",
        help="a repeat with the same key is a no-op (default key: invoice, amount and "
        "reason, so the same credit twice is one note); the same key with another credit "
        "is an error",
    ),
) -> None:
    """Issue a credit note against an invoice (and post it to the ledger)."""
    store = open_store()
    result = issue_credit_note(
        store, invoice_id, amount, reason, principal=SOURCE, idempotency_key=idempotency_key
    )
    note = result.note
    with store.reading() as conn:
        scale = currency_scales(conn)(note.currency)
    word = "issued" if result.created else "already issued, nothing added"
    shown = format_minor(note.amount_minor, scale, note.currency, grouped=True)
    typer.echo(f"credit note {note.credit_note_id}: {shown} on invoice {note.invoice_id}: {word}")


credits_app = typer.Typer(help="Credit notes.", no_args_is_help=True)
invoices_app.add_typer(credits_app, name="credits")


@credits_app.command("list")
def list_credits(
    invoice_id: str | None = typer.Option(None, "--invoice", help="only this invoice's notes"),
    workspace: str | None = typer.Option(None, "--workspace"),
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Credit notes, oldest first, with their invoice's workspace and period, a page at a
    time."""
    store = open_reader()
    if invoice_id is not None:
        find_invoice(store, invoice_id)  # an unknown invoice is an error, not "(no rows)"
    with store.reading() as conn:
        page = credit_note_page(
            conn, invoice_id=invoice_id, workspace=workspace, limit=limit, cursor=cursor
        )
        if not page.rows and cursor is None:  # a typo in a name is an error, not "(no rows)"
            require_known("workspace", workspace, billing_workspaces(conn), option="--workspace")
        scale_of = currency_scales(conn)
    # amounts as everywhere: minor units, currency, scale and the decimal amount
    emit_rows(with_amounts(page.rows, fmt, scale_of), fmt)
    print_next_cursor(page.next_cursor)
