"""The billing projection: ledger transactions, postings, rated usage and invoices as tables.

Money enters the system only as events (``LedgerTransactionPosted`` appended by
the rater in :mod:`projections.billing_rater`, ``InvoiceIssued`` /
``InvoiceVoided`` / ``CreditNoteIssued`` appended by the period jobs and the
CLI). This projection folds them, plus the occupancy and price facts billing
needs, into the tables of :mod:`projections.billing_tables`, so reports, the
rater and invoice issuing read indexed rows instead of replaying events.
Deterministic (no wall clock): a rebuild gives the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text

from ledger.envelopes import decode
from ledger.events import (
    CreditNoteIssued,
    InvoiceIssued,
    InvoiceVoided,
    LedgerTransactionPosted,
    OccupancyEnded,
    OccupancyStarted,
    PriceBookPublished,
    SpotPriceChanged,
)
from ledger.store.base import RecordedEvent
from ledger.store.postgres import PostgresEventStore
from projections.base import Projection
from projections.billing_tables import (
    billing_cost_monthly,
    billing_credit_notes,
    billing_invoice_lines,
    billing_invoices,
    billing_line_totals,
    billing_occupancies,
    billing_postings,
    billing_prices,
    billing_transactions,
    billing_usage_lines,
)

__all__ = ["BILLING_CHECKPOINT", "BillingProjection", "catch_up_on"]

#: The checkpoint name the projector runner uses for this projection.
BILLING_CHECKPOINT = "projection:billing"


@dataclass
class _Page:
    starts: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    prices: list[dict[str, Any]] = field(default_factory=list)
    txns: list[dict[str, Any]] = field(default_factory=list)
    postings: list[dict[str, Any]] = field(default_factory=list)
    line_totals: dict[tuple[str, ...], list[int]] = field(default_factory=dict)
    usage_lines: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    monthly: dict[tuple[str, ...], int] = field(default_factory=dict)
    rated_to: dict[str, Any] = field(default_factory=dict)
    invoices: list[dict[str, Any]] = field(default_factory=list)
    invoice_lines: list[dict[str, Any]] = field(default_factory=list)
    voids: list[dict[str, Any]] = field(default_factory=list)
    credits: list[dict[str, Any]] = field(default_factory=list)


class BillingProjection(Projection):
    name = "billing"
    tables = (
        billing_occupancies,
        billing_prices,
        billing_transactions,
        billing_postings,
        billing_line_totals,
        billing_usage_lines,
        billing_cost_monthly,
        billing_invoices,
        billing_invoice_lines,
        billing_credit_notes,
    )
    event_types = frozenset(
        {
            "OccupancyStarted",
            "OccupancyEnded",
            "PriceBookPublished",
            "SpotPriceChanged",
            "LedgerTransactionPosted",
            "InvoiceIssued",
            "InvoiceVoided",
            "CreditNoteIssued",
        }
    )

    def apply(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        page = _Page()
        for record in events:
            if record.envelope.type not in self.event_types:
                continue
            data = decode(record.envelope)
            if isinstance(data, OccupancyStarted):
                page.starts.append(_start_row(record, data))
            elif isinstance(data, OccupancyEnded):
                page.ends.append(_end_row(record, data))
            elif isinstance(data, PriceBookPublished | SpotPriceChanged):
                page.prices.append(_price_row(record, data))
            elif isinstance(data, LedgerTransactionPosted):
                _fold_transaction(page, record, data)
            elif isinstance(data, InvoiceIssued):
                _fold_invoice(page, record, data)
            elif isinstance(data, InvoiceVoided):
                page.voids.append({"invoice_id": data.invoice_id, "reason": data.reason})
            elif isinstance(data, CreditNoteIssued):
                page.credits.append(
                    {
                        "credit_note_id": data.credit_note_id,
                        "invoice_id": data.invoice_id,
                        "amount_minor": data.amount_minor,
                        "currency": data.currency,
                        "reason": data.reason,
                        "position": record.position,
                        "recorded_at": record.recorded_at,
                    }
                )
        _write(conn, page)


# --- folding ---------------------------------------------------------------------


def _start_row(record: RecordedEvent, d: OccupancyStarted) -> dict[str, Any]:
    return {
        "occupancy_id": d.occupancy_id,
        "job_uid": d.job_uid,
        "workspace": d.workspace,
        "quota": d.quota,
        "user_name": d.user,
        "flavor": d.flavor,
        "mgpu": d.mgpu,
        "cpu_milli": d.cpu_milli,
        "memory_mib": d.memory_mib,
        "billing_mode": d.billing_mode,
        "started_at": d.started_at,
        "start_event_id": record.envelope.event_id,
        "start_position": record.position,
        "start_recorded_at": record.recorded_at,
    }


def _end_row(record: RecordedEvent, d: OccupancyEnded) -> dict[str, Any]:
    return {
        "occupancy_id": d.occupancy_id,
        "job_uid": d.job_uid,
        "ended_at": d.ended_at,
        "end_reason": d.reason,
        "end_event_id": record.envelope.event_id,
        "end_position": record.position,
        "end_recorded_at": record.recorded_at,
    }


def _price_row(record: RecordedEvent, d: PriceBookPublished | SpotPriceChanged) -> dict[str, Any]:
    key = d.book_id if isinstance(d, PriceBookPublished) else d.resource
    return {
        "position": record.position,
        "event_id": record.envelope.event_id,
        "type": record.envelope.type,
        "key": key,
        "effective_from": d.effective_from,
        "recorded_at": record.recorded_at,
        "data": record.envelope.data,
    }


def _fold_transaction(page: _Page, record: RecordedEvent, d: LedgerTransactionPosted) -> None:
    receivable = [p for p in d.postings if p.account.startswith("receivable/")]
    amount = sum(p.amount_minor for p in receivable)
    currency = d.postings[0].currency if d.postings else None
    u = d.usage
    workspace = (
        u.workspace
        if u is not None
        else (receivable[0].account.removeprefix("receivable/") if receivable else None)
    )
    page.txns.append(
        {
            "transaction_id": d.transaction_id,
            "event_id": record.envelope.event_id,
            "position": record.position,
            "occurred_at": record.envelope.occurred_at,
            "recorded_at": record.recorded_at,
            "period": d.period,
            "memo": d.memo,
            "reverses": d.reverses,
            "cause_event_ids": list(d.cause_event_ids),
            "currency": currency,
            "amount_minor": amount,
            "workspace": workspace,
            "occupancy_id": u.occupancy_id if u else None,
            "job_uid": u.job_uid if u else None,
            "quota": u.quota if u else None,
            "user_name": u.user if u else None,
            "flavor": u.flavor if u else None,
            "resource": u.resource if u else None,
            "billing_mode": u.billing_mode if u else None,
            "usage_period": u.usage_period if u else None,
            "unit": u.unit if u else None,
            "usage": u.usage if u else None,
            "as_of": u.as_of if u else None,
            "data": record.envelope.data,
        }
    )
    for seq, p in enumerate(d.postings):
        page.postings.append(
            {
                "transaction_id": d.transaction_id,
                "seq": seq,
                "account": p.account,
                "amount_minor": p.amount_minor,
                "currency": p.currency,
            }
        )
    if u is None or currency is None:
        return
    lk = (u.occupancy_id, u.usage_period, u.resource, u.billing_mode)
    tot = page.line_totals.setdefault(lk, [0, 0])
    tot[0] += u.usage
    tot[1] += amount
    quota = u.quota or ""
    uk = (u.job_uid, u.usage_period, u.resource, u.billing_mode, currency)
    line = page.usage_lines.setdefault(
        uk,
        {
            "job_uid": u.job_uid,
            "usage_period": u.usage_period,
            "resource": u.resource,
            "billing_mode": u.billing_mode,
            "currency": currency,
            "workspace": u.workspace,
            "quota": quota,
            "user_name": u.user,
            "flavor": u.flavor,
            "unit": u.unit,
            "usage": 0,
            "amount_minor": 0,
        },
    )
    line["usage"] += u.usage
    line["amount_minor"] += amount
    mk = (u.usage_period, u.workspace, quota, u.user, u.flavor, u.billing_mode, currency)
    page.monthly[mk] = page.monthly.get(mk, 0) + amount
    previous = page.rated_to.get(u.occupancy_id)
    if previous is None or u.as_of > previous:
        page.rated_to[u.occupancy_id] = u.as_of


def _fold_invoice(page: _Page, record: RecordedEvent, d: InvoiceIssued) -> None:
    page.invoices.append(
        {
            "invoice_id": d.invoice_id,
            "workspace": d.workspace,
            "period": d.period,
            "currency": d.currency,
            "total_minor": d.total_minor,
            "line_count": len(d.lines),
            "issued_at": d.issued_at,
            "status": "issued",
            "position": record.position,
            "recorded_at": record.recorded_at,
        }
    )
    for n, line in enumerate(d.lines, start=1):
        page.invoice_lines.append(
            {
                "invoice_id": d.invoice_id,
                "line_no": n,
                "description": line.description,
                "workspace": line.workspace,
                "job_uid": line.job_uid,
                "resource": line.resource,
                "billing_mode": line.billing_mode,
                "quantity": line.quantity,
                "unit": line.unit,
                "amount_minor": line.amount_minor,
                "transaction_ids": list(line.transaction_ids),
            }
        )


# --- writing ---------------------------------------------------------------------

_START_COLS = (
    "occupancy_id, job_uid, workspace, quota, user_name, flavor, mgpu, cpu_milli, memory_mib, "
    "billing_mode, started_at, start_event_id, start_position, start_recorded_at"
)
_END_COLS = (
    "occupancy_id, job_uid, ended_at, end_reason, end_event_id, end_position, end_recorded_at"
)


def _values(cols: str) -> str:
    return ", ".join(f":{c.strip()}" for c in cols.split(","))


def _updates(cols: str, skip: str = "occupancy_id, job_uid") -> str:
    skipped = {c.strip() for c in skip.split(",")}
    return ", ".join(
        f"{c.strip()} = EXCLUDED.{c.strip()}" for c in cols.split(",") if c.strip() not in skipped
    )


def _insert(conn: Connection, table: str, rows: list[dict[str, Any]], *, json: Sequence[str] = ()
            ) -> None:  # fmt: skip
    if not rows:
        return
    cols = list(rows[0])
    values = ", ".join(f"CAST(:{c} AS jsonb)" if c in json else f":{c}" for c in cols)
    if json:
        import orjson

        rows = [
            {k: (orjson.dumps(v).decode() if k in json else v) for k, v in r.items()} for r in rows
        ]
    conn.execute(
        text(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({values}) ON CONFLICT DO NOTHING"),
        rows,
    )


def _write(conn: Connection, page: _Page) -> None:
    if page.starts:
        # the first start of an occupancy wins; an end recorded earlier keeps its columns
        conn.execute(
            text(
                f"INSERT INTO billing_occupancies ({_START_COLS}) VALUES ({_values(_START_COLS)}) "
                f"ON CONFLICT (occupancy_id) DO UPDATE SET {_updates(_START_COLS)} "
                "WHERE billing_occupancies.start_event_id IS NULL"
            ),
            page.starts,
        )
    if page.ends:
        conn.execute(
            text(
                f"INSERT INTO billing_occupancies ({_END_COLS}) VALUES ({_values(_END_COLS)}) "
                f"ON CONFLICT (occupancy_id) DO UPDATE SET {_updates(_END_COLS)} "
                "WHERE billing_occupancies.end_event_id IS NULL"
            ),
            page.ends,
        )
    _insert(conn, "billing_prices", page.prices, json=("data",))
    _insert(conn, "billing_transactions", page.txns, json=("cause_event_ids", "data"))
    _insert(conn, "billing_postings", page.postings)
    if page.line_totals:
        conn.execute(
            text(
                "INSERT INTO billing_line_totals VALUES (:o, :p, :r, :m, :u, :a) "
                "ON CONFLICT (occupancy_id, usage_period, resource, billing_mode) DO UPDATE SET "
                "usage = billing_line_totals.usage + EXCLUDED.usage, "
                "amount_minor = billing_line_totals.amount_minor + EXCLUDED.amount_minor"
            ),
            [
                {"o": k[0], "p": k[1], "r": k[2], "m": k[3], "u": v[0], "a": v[1]}
                for k, v in page.line_totals.items()
            ],
        )
    if page.usage_lines:
        cols = list(next(iter(page.usage_lines.values())))
        conn.execute(
            text(
                f"INSERT INTO billing_usage_lines ({', '.join(cols)}) "
                f"VALUES ({', '.join(':' + c for c in cols)}) "
                "ON CONFLICT (job_uid, usage_period, resource, billing_mode, currency) "
                "DO UPDATE SET usage = billing_usage_lines.usage + EXCLUDED.usage, "
                "amount_minor = billing_usage_lines.amount_minor + EXCLUDED.amount_minor"
            ),
            list(page.usage_lines.values()),
        )
    if page.monthly:
        conn.execute(
            text(
                "INSERT INTO billing_cost_monthly VALUES (:p, :w, :q, :u, :f, :m, :c, :a) "
                "ON CONFLICT (usage_period, workspace, quota, user_name, flavor, billing_mode, "
                "currency) DO UPDATE SET "
                "amount_minor = billing_cost_monthly.amount_minor + EXCLUDED.amount_minor"
            ),
            [
                {
                    "p": k[0],
                    "w": k[1],
                    "q": k[2],
                    "u": k[3],
                    "f": k[4],
                    "m": k[5],
                    "c": k[6],
                    "a": v,
                }
                for k, v in page.monthly.items()
            ],
        )
    if page.rated_to:
        conn.execute(
            text(
                "UPDATE billing_occupancies SET rated_to = GREATEST(rated_to, :t) "
                "WHERE occupancy_id = :o"
            ),
            [{"o": o, "t": t} for o, t in page.rated_to.items()],
        )
    for row in page.invoices:
        row.setdefault("credited_minor", 0)
    _insert(conn, "billing_invoices", page.invoices)
    _insert(conn, "billing_invoice_lines", page.invoice_lines, json=("transaction_ids",))
    if page.voids:
        conn.execute(
            text(
                "UPDATE billing_invoices SET status = 'voided', void_reason = :reason "
                "WHERE invoice_id = :invoice_id"
            ),
            page.voids,
        )
    if page.credits:
        _insert(conn, "billing_credit_notes", page.credits)
        conn.execute(
            text(
                "UPDATE billing_invoices SET credited_minor = credited_minor + :amount_minor "
                "WHERE invoice_id = :invoice_id"
            ),
            page.credits,
        )


def catch_up_on(store: PostgresEventStore, conn: Connection, *, page_size: int = 5000) -> int:
    """Bring the billing projection to the store's head inside the caller's transaction.

    The rater and the period close call this while holding the store's append
    lock, so what they decide from these tables is exactly what the store holds.
    Same checkpoint as the projector runner (``projection:billing``), so the two
    never apply a page twice.
    """
    from sqlalchemy import text as sql

    projection = BillingProjection()
    conn.execute(
        sql(
            "INSERT INTO checkpoints (name, position, offsets, updated_at) "
            "VALUES (:n, 0, '{}'::jsonb, now()) ON CONFLICT (name) DO NOTHING"
        ),
        {"n": BILLING_CHECKPOINT},
    )
    position = int(
        conn.execute(
            sql("SELECT position FROM checkpoints WHERE name = :n FOR UPDATE"),
            {"n": BILLING_CHECKPOINT},
        ).scalar_one()
    )
    read = 0
    while True:
        page = store.read_after_on(conn, position, page_size)
        if not page:
            break
        relevant = [r for r in page if r.envelope.type in projection.event_types]
        if relevant:
            projection.apply(conn, relevant)
        position = page[-1].position
        read += len(page)
    if read:
        conn.execute(
            sql("UPDATE checkpoints SET position = :p, updated_at = now() WHERE name = :n"),
            {"p": position, "n": BILLING_CHECKPOINT},
        )
    return read
