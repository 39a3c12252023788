"""``dlc-ledger billing run|serve`` and ``dlc-ledger invoices list|show|void|credit``.

Invoices are events (``InvoiceIssued`` on ``invoice/<id>``), never edited: a
wrong one is voided (``InvoiceVoided``; the period reopens and the next tick
issues the next revision) or partly refunded with a credit note
(``CreditNoteIssued`` plus a balanced ``LedgerTransactionPosted`` that credits
the workspace's receivable and debits ``revenue/credit-notes``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import typer
from sqlalchemy import text

from consumers.billing_rater import transaction_envelope
from dlc_ledger.cli.amounts import currency_scales, with_amounts
from dlc_ledger.cli.finance import sync_billing
from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    parse_instant,
    parse_period,
    print_next_cursor,
    require_known,
)
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows, escape_controls
from dlc_ledger.services.billing import DEFAULT_GRACE, TickResult, serve, tick
from dlc_ledger.services.clocks import billing_now, observed_cluster_time
from dlc_ledger.wiring.context import open_store
from ledger.accounts import (
    balanced_transaction,
    receivable_account,
    reversal,
    rounding_transaction_id,
)
from ledger.canonical import format_timestamp
from ledger.envelopes import Envelope, make_envelope
from ledger.events import CreditNoteIssued, InvoiceVoided, LedgerTransactionPosted, Posting
from ledger.ids import deterministic_id
from ledger.money import default_scale, format_minor, from_minor, parse_decimal, to_minor
from ledger.store.postgres import PostgresEventStore
from projections.billing_reads import load_schedule
from projections.finance_reports import invoice_job_costs, invoice_lines
from projections.names import billing_workspaces, invoice_periods
from projections.pages import decode_cursor, encode_cursor

__all__ = [
    "CREDIT_NOTES_ACCOUNT",
    "CreditResult",
    "billing_app",
    "billing_until",
    "invoice_detail",
    "invoices_app",
    "issue_credit_note",
    "void_invoice",
]

billing_app = typer.Typer(help="Rating, accrual and period close.", no_args_is_help=True)
invoices_app = typer.Typer(help="Invoices and credit notes.", no_args_is_help=True)

CREDIT_NOTES_ACCOUNT = "revenue/credit-notes"
SOURCE = "api/invoices-cli"


def _print_tick(result: TickResult) -> None:
    r = result.rated
    typer.echo(
        f"rated {r.finals} ended occupancies, accrued {r.accrued} open ones to "
        f"{result.accrued_to.isoformat()}, posted {r.posted} transactions, "
        f"{r.unrateable} unrateable; issued {len(result.invoices)} invoices"
    )


def billing_until(
    store: PostgresEventStore, until: datetime | None, *, force: bool = False
) -> tuple[datetime, str | None]:
    """The cluster instant a run acts at, and a note to print when it was not asked for.

    An explicit ``until`` beyond the latest cluster time observed is refused unless
    ``force``: every open occupancy would be billed up to it, and every period up to
    it closed. Without one: the wall clock, or the latest observed cluster time when
    that lags the wall clock by more than a period (a replayed history).
    """
    observed = observed_cluster_time(store)
    if until is not None:
        if observed is not None and until > observed and not force:
            raise ValueError(
                f"--until {format_timestamp(until)} is beyond the latest cluster time observed "
                f"({format_timestamp(observed)}): open occupancies would be billed and periods "
                "closed up to it; pass --force if that is meant"
            )
        return until, None
    chosen = billing_now(observed, datetime.now(UTC))
    if chosen.replayed:
        return chosen.at, (
            f"the cluster clock is not the wall clock (a replay?): billing up to the latest "
            f"cluster time observed, {format_timestamp(chosen.at)} (pass --until to choose)"
        )
    return chosen.at, None


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
) -> None:
    """Run the rater and one scheduler tick, then exit."""
    store = open_store()
    asked = parse_instant(until, option="--until") if until else None
    now, note = billing_until(store, asked, force=force)
    if note:
        typer.echo(note, err=True)
    _print_tick(tick(store, now, grace=timedelta(hours=grace_hours)))


@billing_app.command("serve")
def serve_cmd(
    interval_seconds: float = typer.Option(60.0, "--interval-seconds"),
    grace_hours: float = typer.Option(
        DEFAULT_GRACE.total_seconds() / 3600, "--grace-hours", min=0, help="(>= 0)"
    ),
) -> None:
    """Run the rater and ticks under APScheduler on the wall clock until interrupted."""
    store = open_store()
    stop = threading.Event()
    try:
        serve(
            store,
            stop,
            interval=timedelta(seconds=interval_seconds),
            grace=timedelta(hours=grace_hours),
            on_tick=_print_tick,
        )
    except KeyboardInterrupt:
        stop.set()


# --- invoices -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Invoice:
    invoice_id: str
    workspace: str
    period: str
    currency: str
    total_minor: int
    credited_minor: int
    status: str


def _invoice(store: PostgresEventStore, invoice_id: str) -> _Invoice:
    sync_billing(store)
    with store.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT invoice_id, workspace, period, currency, total_minor, credited_minor, "
                "status FROM billing_invoices WHERE invoice_id = :i"
            ),
            {"i": invoice_id},
        ).first()
    if row is None:
        raise ValueError(f"no invoice {invoice_id!r}")
    return _Invoice(*row)


def invoice_detail(store: PostgresEventStore, invoice_id: str) -> dict[str, Any]:
    """The invoice header with its lines and credit notes (as stored by the billing
    projection)."""
    head = _invoice(store, invoice_id)
    with store.engine.connect() as conn:
        header = (
            conn.execute(
                text("SELECT * FROM billing_invoices WHERE invoice_id = :i"), {"i": invoice_id}
            )
            .mappings()
            .one()
        )
        lines = invoice_lines(conn, head.invoice_id)
        jobs = invoice_job_costs(conn, head.invoice_id)
        notes = [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT credit_note_id, amount_minor, currency, reason, recorded_at "
                    "FROM billing_credit_notes WHERE invoice_id = :i ORDER BY position"
                ),
                {"i": invoice_id},
            ).mappings()
        ]
    for line in lines:
        line["jobs"] = jobs.get(line["line_no"], [])  # the line's per-job breakdown
    out = {k: v for k, v in header.items() if k not in ("position",)}
    out["lines"] = lines
    out["credit_notes"] = notes
    return out


def void_invoice(store: PostgresEventStore, invoice_id: str, reason: str) -> None:
    inv = _invoice(store, invoice_id)
    if inv.status != "issued":
        raise ValueError(f"invoice {invoice_id} is already {inv.status}")
    if not reason.strip():
        raise ValueError("a void needs a --reason")
    now = datetime.now(UTC)
    stream = f"invoice/{invoice_id}"
    voided = deterministic_id("event", "InvoiceVoided", invoice_id)
    store.append(
        [
            make_envelope(
                InvoiceVoided(invoice_id=invoice_id, reason=reason),
                event_id=voided,
                stream=stream,
                occurred_at=now,
                observed_at=now,
                source=SOURCE,
            ),
            *_rounding_reversal(store, invoice_id, str(voided), now),
        ],
    )


def _rounding_reversal(
    store: PostgresEventStore, invoice_id: str, voided: str, now: datetime
) -> list[Envelope]:
    """The reversal of a voided invoice's rounding posting (the re-issue rounds anew)."""
    with store.engine.connect() as conn:
        data = conn.execute(
            text("SELECT data FROM billing_transactions WHERE transaction_id = :t"),
            {"t": rounding_transaction_id(invoice_id)},
        ).scalar()
    if data is None:
        return []
    txn = reversal(
        LedgerTransactionPosted.model_validate(data),
        memo=f"rounding of voided invoice {invoice_id} reversed",
        cause_event_ids=(voided,),
    )
    return [transaction_envelope(txn, now)]


@dataclass(frozen=True)
class CreditResult:
    note: CreditNoteIssued
    created: bool  # False: the idempotency key's note already existed (nothing appended)


def _credit_minor(amount: str, scale: int, currency: str) -> int:
    value = parse_decimal(amount, what="amount")
    minor = to_minor(value, scale)
    if from_minor(minor, scale) != value:
        raise ValueError(
            f"amount {amount} has more decimals than {currency} allows (scale {scale}): "
            f"it would be stored as {format_minor(minor, scale, currency)}"
        )
    if minor <= 0:
        raise ValueError("a credit note amount must be positive")
    return minor


def issue_credit_note(
    store: PostgresEventStore,
    invoice_id: str,
    amount: str,
    reason: str,
    *,
    idempotency_key: str | None = None,
) -> CreditResult:
    """Credit ``amount`` (currency units, e.g. ``"12.50"``) against an issued invoice.

    The note's id derives from ``idempotency_key`` (default: the invoice, amount and
    reason), so a repeat is a no-op that returns the existing note, and a key reused
    for a different credit is refused.
    """
    inv = _invoice(store, invoice_id)
    with store.engine.connect() as conn:
        schedule = load_schedule(conn)
    scale = schedule.scale if schedule.scale is not None else default_scale(inv.currency)
    minor = _credit_minor(amount, scale, inv.currency)
    key = idempotency_key
    if key is None:
        key = f"{invoice_id}/{minor}/{reason}"
    elif not key.strip():
        raise ValueError("--idempotency-key must not be empty")
    note_id = str(deterministic_id("credit-note", key))
    note = CreditNoteIssued(
        credit_note_id=note_id,
        invoice_id=invoice_id,
        amount_minor=minor,
        currency=inv.currency,
        reason=reason,
    )
    with store.engine.connect() as conn:
        existing = (
            conn.execute(
                text(
                    "SELECT credit_note_id, invoice_id, amount_minor, currency, reason "
                    "FROM billing_credit_notes WHERE credit_note_id = :n"
                ),
                {"n": note_id},
            )
            .mappings()
            .first()
        )
    if existing is not None:
        before = CreditNoteIssued.model_validate(dict(existing))
        if before != note:
            raise ValueError(
                f"idempotency key {key!r} was used for credit note {note_id} "
                f"({format_minor(before.amount_minor, scale, before.currency)} on invoice "
                f"{before.invoice_id}: {before.reason}); use a new key for a different credit"
            )
        return CreditResult(before, created=False)
    if inv.status != "issued":
        raise ValueError(f"invoice {invoice_id} is {inv.status}: credit notes need an issued one")
    open_minor = inv.total_minor - inv.credited_minor
    if minor > open_minor:
        raise ValueError(
            f"credit of {format_minor(minor, scale, inv.currency)} exceeds what is left on the "
            f"invoice ({format_minor(open_minor, scale, inv.currency)})"
        )
    stream = f"invoice/{invoice_id}"
    version = store.stream_version(stream)
    txn = balanced_transaction(
        str(deterministic_id("txn-credit-note", note_id)),
        [
            Posting(
                account=receivable_account(inv.workspace),
                amount_minor=-minor,
                currency=inv.currency,
            ),
            Posting(account=CREDIT_NOTES_ACCOUNT, amount_minor=minor, currency=inv.currency),
        ],
        cause_event_ids=(str(deterministic_id("event", "CreditNoteIssued", note_id)),),
        period=None,
        memo=f"credit note {note_id} on invoice {invoice_id} ({inv.period}): {reason}",
    )
    now = datetime.now(UTC)
    store.append(
        [
            make_envelope(
                note,
                event_id=deterministic_id("event", "CreditNoteIssued", note_id),
                stream=stream,
                occurred_at=now,
                observed_at=now,
                source=SOURCE,
            ),
            transaction_envelope(txn, now),
        ],
        expected_versions={stream: version},
    )
    return CreditResult(note, created=True)


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
    # keyset: the sort key of the previous page's last invoice
    after = decode_cursor(cursor, str, str, str, str) if cursor is not None else [None] * 4
    store = open_store()
    sync_billing(store)
    with store.engine.connect() as conn:
        rows = [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT invoice_id, workspace, period, status, currency, total_minor, "
                    "credited_minor, line_count, issued_at, recorded_at FROM billing_invoices "
                    "WHERE (CAST(:w AS text) IS NULL OR workspace = :w) "
                    "AND (CAST(:p AS text) IS NULL OR period = :p) "
                    "AND (CAST(:ap AS text) IS NULL OR (period, workspace, issued_at, invoice_id) "
                    "> (:ap, :aw, CAST(:at AS timestamptz), :ai)) "
                    "ORDER BY period, workspace, issued_at, invoice_id LIMIT :n"
                ),
                {"w": workspace, "p": period, "ap": after[0], "aw": after[1], "at": after[2],
                 "ai": after[3], "n": limit + 1},
            ).mappings()
        ]  # fmt: skip
        if not rows and cursor is None:  # a typo in a name is an error, not "(no rows)"
            require_known("workspace", workspace, billing_workspaces(conn), option="--workspace")
            require_known("invoiced period", period, invoice_periods(conn), option="--period")
        scale_of = currency_scales(conn)
    emit_rows(with_amounts(rows[:limit], fmt, scale_of), fmt)
    if len(rows) > limit:
        last = rows[limit - 1]
        key = [last["period"], last["workspace"], last["issued_at"].isoformat(), last["invoice_id"]]
        print_next_cursor(encode_cursor(key))


@invoices_app.command("show")
def show_invoice(
    invoice_id: str = typer.Argument(...), fmt: FormatOption = RowFormat.table
) -> None:
    """One invoice: header (with its credit notes) and lines (json: one object; csv/table:
    the lines). issued_at is cluster time, recorded_at store time."""
    store = open_store()
    detail = invoice_detail(store, invoice_id)
    with store.engine.connect() as conn:
        scale_of = currency_scales(conn)
    currency = detail["currency"]
    lines = [
        {k: v for k, v in line.items() if k not in ("transaction_ids", "jobs")}
        for line in detail["lines"]
    ]
    if fmt == "json":
        (header,) = with_amounts([detail], fmt, scale_of)
        header["lines"] = with_amounts(detail["lines"], fmt, scale_of, currency=currency)
        header["credit_notes"] = with_amounts(detail["credit_notes"], fmt, scale_of)
        typer.echo(_json(header))
        return
    if fmt == "table":
        scale = scale_of(currency)
        total = format_minor(detail["total_minor"], scale, currency, grouped=True)
        credited = format_minor(detail["credited_minor"], scale, currency, grouped=True)
        workspace = escape_controls(detail["workspace"])  # from the cluster's annotations
        typer.echo(
            f"invoice {detail['invoice_id']}  workspace {workspace}  period "
            f"{detail['period']}  {detail['status']}  total {total}  credited {credited}\n"
            f"issued_at {detail['issued_at'].isoformat()} (cluster time)  recorded_at "
            f"{detail['recorded_at'].isoformat()} (store time)"
        )
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
    store = open_store()
    void_invoice(store, invoice_id, reason)
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
    result = issue_credit_note(store, invoice_id, amount, reason, idempotency_key=idempotency_key)
    note = result.note
    word = "issued" if result.created else "already issued, nothing added"
    typer.echo(
        f"credit note {note.credit_note_id}: {note.amount_minor} {note.currency} (minor) "
        f"on invoice {note.invoice_id}: {word}"
    )


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
    after = decode_cursor(cursor, int)[0] if cursor is not None else 0
    store = open_store()
    sync_billing(store)
    with store.engine.connect() as conn:
        rows = [
            dict(r)
            for r in conn.execute(
                text(
                    "SELECT c.credit_note_id, c.invoice_id, i.workspace, i.period, c.currency, "
                    "c.amount_minor, c.reason, c.recorded_at, c.position "
                    "FROM billing_credit_notes c "
                    "LEFT JOIN billing_invoices i ON i.invoice_id = c.invoice_id "
                    "WHERE (CAST(:i AS text) IS NULL OR c.invoice_id = :i) "
                    "AND (CAST(:w AS text) IS NULL OR i.workspace = :w) "
                    "AND c.position > :after ORDER BY c.position LIMIT :n"
                ),
                {"i": invoice_id, "w": workspace, "after": after, "n": limit + 1},
            ).mappings()
        ]
    emit_rows([{k: v for k, v in r.items() if k != "position"} for r in rows[:limit]], fmt)
    if len(rows) > limit:
        print_next_cursor(encode_cursor([rows[limit - 1]["position"]]))
