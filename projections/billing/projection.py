"""The billing projection: ledger transactions, postings, rated usage and invoices as tables.

Money enters the system only as events (``LedgerTransactionPosted`` appended by
the rater in :mod:`processes.billing.rater`, ``InvoiceIssued`` /
``InvoiceVoided`` / ``CreditNoteIssued`` appended by the period jobs and the
CLI). This projection folds them, plus the occupancy and price facts billing
needs, into the tables of :mod:`projections.billing.tables`, so reports, the
rater and invoice issuing read indexed rows instead of replaying events.
Deterministic (no wall clock): a rebuild gives the same rows.

Amounts are folded as precise integers (10**-9 minor units, ``ledger.money``) and
written to ``numeric`` columns as decimals of minor units, so sums are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from pydantic import AwareDatetime, TypeAdapter
from sqlalchemy import Connection, Table, text

from ledger.catalogue import decode
from ledger.events import (
    CreditApplied,
    CreditNoteIssued,
    InvoiceIssued,
    InvoiceOverdue,
    InvoiceOverSettled,
    InvoiceVoided,
    PaymentRecorded,
    PriceBookPublished,
    SpotPriceChanged,
)
from ledger.money import PRECISE_DIGITS, precise_decimal, precise_from_decimal
from ledger.rating import rate_key
from ledger.store.base import EventStore, RecordedEvent, UnitOfWork
from projections.base import Projection
from projections.billing.spillover import spilled
from projections.billing.tables import (
    billing_cost_monthly,
    billing_credit_applications,
    billing_credit_notes,
    billing_credit_returns,
    billing_invoice_lines,
    billing_invoices,
    billing_line_totals,
    billing_occupancies,
    billing_payments,
    billing_postings,
    billing_prices,
    billing_quota_groups,
    billing_transactions,
    billing_usage_lines,
    billing_workloads,
    billing_workspace_quotas,
)
from projections.bulk import copy_table, driver
from projections.steps import advance_on, catch_up

__all__ = ["BillingProjection", "catch_up_on"]


@dataclass
class _Page:
    # occupancy id -> [start half, end half] (the first of each in the page; None: absent)
    occupancies: dict[str, list[tuple[Any, ...] | None]] = field(default_factory=dict)
    prices: list[dict[str, Any]] = field(default_factory=list)
    txns: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    postings: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)
    line_totals: dict[tuple[str, ...], list[int]] = field(default_factory=dict)  # precise
    usage_lines: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    monthly: dict[tuple[str, ...], int] = field(default_factory=dict)
    rated_to: dict[str, datetime] = field(default_factory=dict)
    invoices: list[dict[str, Any]] = field(default_factory=list)
    invoice_lines: list[dict[str, Any]] = field(default_factory=list)
    voids: list[dict[str, Any]] = field(default_factory=list)
    credits: list[dict[str, Any]] = field(default_factory=list)
    payments: list[dict[str, Any]] = field(default_factory=list)
    applications: list[dict[str, Any]] = field(default_factory=list)
    returns: list[dict[str, Any]] = field(default_factory=list)  # InvoiceOverSettled
    overdue: list[dict[str, Any]] = field(default_factory=list)
    # workspace -> (quota, position): bindings known so far; loaded on first need
    bindings: dict[str, tuple[str | None, int]] | None = None
    bound: dict[str, tuple[str | None, int]] = field(default_factory=dict)  # changed here
    # quota -> (parent, groups it names, spec); loaded on first need, None: deleted here
    quotas: dict[str, Quota | None] | None = None
    quotas_changed: dict[str, int] = field(default_factory=dict)  # quota -> position
    # job uid -> billing_workloads row: the workloads created in the page
    workloads: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # the uids of services that spill onto public resources; loaded on first need
    spilling: set[str] | None = None


#: A quota as billing folds it: parent, the resource groups it names, its spec as applied
#: (a dict; None in rows folded before migration 0024).
Quota = tuple[str | None, tuple[str, ...], dict[str, Any] | None]


class BillingProjection(Projection):
    name = "billing"
    cost = 1.0
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
        billing_workspace_quotas,
        billing_quota_groups,
        billing_workloads,
        billing_payments,
        billing_credit_applications,
        billing_credit_returns,
    )
    event_types = frozenset(
        {
            "WorkloadCreated",
            "WorkspaceBound",
            "QuotaCreated",
            "QuotaChanged",
            "QuotaDeleted",
            "OccupancyStarted",
            "OccupancyEnded",
            "PriceBookPublished",
            "SpotPriceChanged",
            "LedgerTransactionPosted",
            "InvoiceIssued",
            "InvoiceVoided",
            "CreditNoteIssued",
            "PaymentRecorded",
            "CreditApplied",
            "InvoiceOverdue",
            "InvoiceOverSettled",
        }
    )

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        page = _Page()
        for record in events:
            kind = record.type
            # the high-volume types are read straight from the stored dicts (the store
            # validated them on the way in); the rare ones through their models
            if kind == "OccupancyStarted":
                _fold_start(page, record, conn)
            elif kind == "OccupancyEnded":
                _fold_end(page, record)
            elif kind == "LedgerTransactionPosted":
                _fold_transaction(page, record)
            elif kind == "WorkspaceBound":
                d = record.data
                binding = (d.get("quota"), record.position)
                _bindings(page, conn)[d["workspace"]] = binding
                page.bound[d["workspace"]] = binding
            elif kind in ("QuotaCreated", "QuotaChanged", "QuotaDeleted"):
                _fold_quota(page, record, conn)
            elif kind == "WorkloadCreated":
                _fold_workload(page, record, conn)
            elif kind not in self.event_types:
                continue
            else:
                data = decode(record.envelope)
                if isinstance(data, PriceBookPublished | SpotPriceChanged):
                    page.prices.append(_price_row(record, data))
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
                elif isinstance(
                    data, PaymentRecorded | CreditApplied | InvoiceOverdue | InvoiceOverSettled
                ):
                    _fold_receipt(page, record, data)
        _write(conn, page)


# --- folding ---------------------------------------------------------------------


def _ts(value: Any) -> datetime:
    """A stored timestamp (ISO text) as an aware datetime, as the event model parses it."""
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return _AWARE.validate_python(value)
    return parsed if parsed.tzinfo is not None else _AWARE.validate_python(value)


_AWARE: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)


def _bindings(page: _Page, conn: Connection) -> dict[str, tuple[str | None, int]]:
    if page.bindings is None:
        page.bindings = {
            ws: (quota, position)
            for ws, quota, position in conn.execute(
                text("SELECT workspace, quota, position FROM billing_workspace_quotas")
            ).all()
        }
    return page.bindings


def _quotas(page: _Page, conn: Connection) -> dict[str, Quota | None]:
    if page.quotas is None:
        page.quotas = {
            quota: (parent, tuple(groups), spec)
            for quota, parent, groups, spec in conn.execute(
                text("SELECT quota, parent, resource_groups, spec FROM billing_quota_groups")
            ).all()
        }
    return page.quotas


def _spilling(page: _Page, conn: Connection) -> set[str]:
    if page.spilling is None:
        page.spilling = set(
            conn.execute(
                text("SELECT job_uid FROM billing_workloads WHERE spillover = 'public'")
            ).scalars()
        )
    return page.spilling


def _fold_workload(page: _Page, record: RecordedEvent, conn: Connection) -> None:
    d = record.data
    uid = d["job_uid"]
    if uid in page.workloads:
        return  # the first creation wins
    spillover = d.get("spillover", "none")
    page.workloads[uid] = (
        uid, d.get("workload", "service"), d.get("kind", "Deployment"),
        d.get("namespace", "default"), d["name"], spillover, record.position,
    )  # fmt: skip
    if spillover == "public":
        _spilling(page, conn).add(uid)


def _fold_quota(page: _Page, record: RecordedEvent, conn: Connection) -> None:
    d = record.data
    quotas = _quotas(page, conn)
    if record.type == "QuotaDeleted":
        quotas[d["quota_id"]] = None
        page.quotas_changed[d["quota_id"]] = record.position
        return
    spec = d["spec"]
    quotas[spec["quota_id"]] = (
        spec.get("parent"), tuple(spec.get("resource_groups") or ()), spec,
    )  # fmt: skip
    page.quotas_changed[spec["quota_id"]] = record.position


def _draws_on_groups(page: _Page, conn: Connection, quota: str | None) -> bool:
    """Whether ``quota`` (or its nearest ancestor naming any) draws on resource groups."""
    quotas = _quotas(page, conn)
    seen: set[str] = set()
    while quota is not None and quota not in seen:
        seen.add(quota)
        entry = quotas.get(quota)
        if entry is None:
            return False
        parent, groups, _ = entry
        if groups:
            return True
        quota = parent
    return False


def _fold_start(page: _Page, record: RecordedEvent, conn: Connection) -> None:
    d = record.data
    halves = page.occupancies.setdefault(d["occupancy_id"], [None, None])
    if halves[0] is not None:
        return  # the first start of an occupancy wins
    quota = d.get("quota")
    if quota is None:
        # the pod named no quota: its workspace's binding when it started (events are
        # folded in position order, so this is a function of the store, not of paging)
        quota = _bindings(page, conn).get(d["workspace"], (None, 0))[0]
    mode = d.get("billing_mode", "public")
    if mode == "public" and _draws_on_groups(page, conn, quota):
        mode = "quota"  # runs on capacity its quota's subscriptions paid for
        if d["job_uid"] in _spilling(page, conn) and spilled(page, conn, d, quota):
            mode = "public"  # a replica beyond its quota's capacity: on public resources
    halves[0] = (
        d["job_uid"],
        d["workspace"],
        quota,
        d.get("user", "unknown"),
        d.get("flavor", "gpu/any"),
        d["mgpu"],
        d["cpu_milli"],
        d["memory_mib"],
        mode,
        _ts(d["started_at"]),
        record.event_id,
        record.position,
        record.recorded_at,
    )


def _fold_end(page: _Page, record: RecordedEvent) -> None:
    d = record.data
    halves = page.occupancies.setdefault(d["occupancy_id"], [None, None])
    if halves[1] is not None:
        return  # the first end wins
    halves[1] = (
        d["job_uid"],
        _ts(d["ended_at"]),
        d.get("reason", "completed"),
        record.event_id,
        record.position,
        record.recorded_at,
    )


def _occupancy_row(occupancy_id: str, halves: list[tuple[Any, ...] | None]) -> tuple[Any, ...]:
    """A billing_occupancies row (table order) from a page's start and/or end half."""
    start, end = halves
    if start is None:
        assert end is not None
        job_uid, ended_at, reason, end_id, end_pos, end_rec = end
        return (occupancy_id, job_uid, *(None,) * 9, ended_at, reason, None, end_id, None,
                end_pos, None, end_rec, None)  # fmt: skip
    (job_uid, workspace, quota, user, flavor, mgpu, cpu, mem, mode, started_at, start_id,
     start_pos, start_rec) = start  # fmt: skip
    ended_at = reason = end_id = end_pos = end_rec = None
    if end is not None:
        _, ended_at, reason, end_id, end_pos, end_rec = end
    return (occupancy_id, job_uid, workspace, quota, user, flavor, mgpu, cpu, mem, mode,
            started_at, ended_at, reason, start_id, end_id, start_pos, end_pos, start_rec,
            end_rec, None)  # fmt: skip


def _price_row(record: RecordedEvent, d: PriceBookPublished | SpotPriceChanged) -> dict[str, Any]:
    key = d.book_id if isinstance(d, PriceBookPublished) else d.resource
    return {
        "position": record.position,
        "event_id": record.event_id,
        "type": record.type,
        "key": key,
        "effective_from": d.effective_from,
        "recorded_at": record.recorded_at,
        "data": record.data,
    }


_WHOLE = 10**PRECISE_DIGITS


def _precise(stored: Any) -> int:
    """A stored posting amount (schema 1: int minor units; 2: decimal string) as precise."""
    return stored * _WHOLE if isinstance(stored, int) else precise_from_decimal(stored)


def _fold_transaction(page: _Page, record: RecordedEvent) -> None:
    d = record.data
    transaction_id = d["transaction_id"]
    postings = d["postings"]
    amount = 0
    receivable = None
    for p in postings:
        if p["account"].startswith("receivable/"):
            amount += _precise(p["amount_minor"])
            if receivable is None:
                receivable = p["account"]
    currency = postings[0]["currency"] if postings else None
    u = d.get("usage")
    if u is not None:
        workspace = u["workspace"]
        quota = u.get("quota")
        user = u.get("user", "unknown")
        flavor = u.get("flavor", "gpu/any")
        as_of = _ts(u["as_of"])
        usage_cols: tuple[Any, ...] = (
            u["occupancy_id"],
            u["job_uid"],
            quota,
            user,
            flavor,
            u["resource"],
            u["billing_mode"],
            u["usage_period"],
            u["unit"],
            u["usage"],
            as_of,
        )
    else:
        workspace = receivable.removeprefix("receivable/") if receivable else None
        usage_cols = (None,) * 11
    if transaction_id not in page.txns:  # the first one wins (ON CONFLICT DO NOTHING)
        page.txns[transaction_id] = (
            transaction_id,
            record.event_id,
            record.position,
            record.occurred_at,
            record.recorded_at,
            d.get("period"),
            d.get("memo", ""),
            d.get("reverses"),
            orjson.dumps(list(d.get("cause_event_ids", ()))),
            currency,
            precise_decimal(amount),
            workspace,
            *usage_cols,
            orjson.dumps(d),
        )
    for seq, p in enumerate(postings):
        page.postings.setdefault(
            (transaction_id, seq),
            (transaction_id, seq, p["account"], precise_decimal(_precise(p["amount_minor"])),
             p["currency"]),
        )  # fmt: skip
    if u is None or currency is None:
        return
    occupancy_id, job_uid, usage_period = u["occupancy_id"], u["job_uid"], u["usage_period"]
    resource, mode, usage = u["resource"], u["billing_mode"], u["usage"]
    rate = "" if u.get("rate") is None else rate_key(Decimal(u["rate"]))
    lk = (occupancy_id, usage_period, resource, mode, rate)
    tot = page.line_totals.get(lk)
    if tot is None:
        page.line_totals[lk] = [usage, amount]
    else:
        tot[0] += usage
        tot[1] += amount
    quota = quota or "-"  # no quota: spelled as the quota projection spells it
    uk = (job_uid, usage_period, resource, mode, currency)
    line = page.usage_lines.get(uk)
    if line is None:
        page.usage_lines[uk] = [*uk, workspace, quota, user, flavor, u["unit"], usage, amount]
    else:
        line[10] += usage
        line[11] += amount
    mk = (usage_period, workspace, quota, user, flavor, mode, currency)
    page.monthly[mk] = page.monthly.get(mk, 0) + amount
    previous = page.rated_to.get(occupancy_id)
    if previous is None or as_of > previous:
        page.rated_to[occupancy_id] = as_of


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
                "rate": line.rate,
                "amount_precise": line.amount_precise,
            }
        )


def _fold_receipt(
    page: _Page,
    record: RecordedEvent,
    d: PaymentRecorded | CreditApplied | InvoiceOverdue | InvoiceOverSettled,
) -> None:
    """Payments, credit applied, over-settlements returned and overdue marks: rows, and
    the invoice's figures."""
    if isinstance(d, PaymentRecorded):
        page.payments.append(
            {
                "payment_id": d.payment_id,
                "invoice_id": d.invoice_id,
                "workspace": d.workspace,
                "amount_minor": d.amount_minor,
                "applied_minor": d.applied_minor,
                "excess_minor": d.excess_minor,
                "currency": d.currency,
                "reference": d.reference,
                "received_at": d.received_at,
                "source": record.source,
                "position": record.position,
                "recorded_at": record.recorded_at,
            }
        )
    elif isinstance(d, CreditApplied):
        page.applications.append(
            {
                "application_id": d.application_id,
                "invoice_id": d.invoice_id,
                "from_invoice_id": d.from_invoice_id,
                "payment_id": d.payment_id,
                "workspace": d.workspace,
                "amount_minor": d.amount_minor,
                "currency": d.currency,
                "occurred_at": record.occurred_at,
                "position": record.position,
            }
        )
    elif isinstance(d, InvoiceOverSettled):
        page.returns.append(
            {
                "settlement_id": d.settlement_id,
                "invoice_id": d.invoice_id,
                "workspace": d.workspace,
                "amount_minor": d.returned_minor,
                "currency": d.currency,
                "occurred_at": record.occurred_at,
                "position": record.position,
            }
        )
    else:
        page.overdue.append({"invoice_id": d.invoice_id, "at": record.occurred_at})


# --- writing ---------------------------------------------------------------------

_OCC_START = (
    "workspace", "quota", "user_name", "flavor", "mgpu", "cpu_milli", "memory_mib",
    "billing_mode", "started_at", "start_event_id", "start_position", "start_recorded_at",
)  # fmt: skip
_OCC_END = ("ended_at", "end_reason", "end_event_id", "end_position", "end_recorded_at")


def _keep_first(half: str, columns: Sequence[str]) -> str:
    """SET clauses taking the page's half only where the stored row lacks it."""
    return ", ".join(
        f"{c} = CASE WHEN billing_occupancies.{half}_event_id IS NULL "
        f"THEN EXCLUDED.{c} ELSE billing_occupancies.{c} END"
        for c in columns
    )


_OCC_UPSERT = (
    "INSERT INTO billing_occupancies SELECT * FROM {temp} ON CONFLICT (occupancy_id) DO UPDATE "
    f"SET {_keep_first('start', _OCC_START)}, {_keep_first('end', _OCC_END)}"
)


def _insert(conn: Connection, table: str, rows: list[dict[str, Any]], *, json: Sequence[str] = ()
            ) -> None:  # fmt: skip
    """Rare rows (prices, invoices): executemany is plenty."""
    if not rows:
        return
    cols = list(rows[0])
    values = ", ".join(f"CAST(:{c} AS jsonb)" if c in json else f":{c}" for c in cols)
    if json:
        rows = [
            {k: (orjson.dumps(v).decode() if k in json else v) for k, v in r.items()} for r in rows
        ]
    conn.execute(
        text(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({values}) ON CONFLICT DO NOTHING"),
        rows,
    )


def _merge(conn: Connection, table: Table, rows: Sequence[tuple[Any, ...]], conflict: str) -> None:
    """Binary COPY ``rows`` (whole rows, table order) into a temporary table, then one
    ``INSERT … SELECT … ON CONFLICT`` with ``conflict`` (``{temp}`` names the table)."""
    if not rows:
        return
    temp = f"_merge_{table.name}"
    with driver(conn).cursor() as cur:
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {temp} (LIKE {table.name}) ON COMMIT DELETE ROWS"
        )
    copy_table(conn, table, rows, into=temp)
    with driver(conn).cursor() as cur:
        cur.execute(conflict.format(temp=temp))
        cur.execute(f"DELETE FROM {temp}")


def _add_on_conflict(table: Table, added: Sequence[str]) -> str:
    keys = ", ".join(c.name for c in table.primary_key.columns)
    sets = ", ".join(f"{c} = {table.name}.{c} + EXCLUDED.{c}" for c in added)
    return (
        f"INSERT INTO {table.name} SELECT * FROM {{temp}} ON CONFLICT ({keys}) DO UPDATE SET {sets}"
    )


_TXN_INSERT = "INSERT INTO billing_transactions SELECT * FROM {temp} ON CONFLICT DO NOTHING"
_POSTING_INSERT = "INSERT INTO billing_postings SELECT * FROM {temp} ON CONFLICT DO NOTHING"
_LINE_TOTALS = _add_on_conflict(billing_line_totals, ("usage", "amount_minor"))
_USAGE_LINES = _add_on_conflict(billing_usage_lines, ("usage", "amount_minor"))
_MONTHLY = _add_on_conflict(billing_cost_monthly, ("amount_minor",))


def _write(conn: Connection, page: _Page) -> None:
    if page.quotas_changed and page.quotas is not None:
        quotas = page.quotas
        with driver(conn).cursor() as cur:
            gone = sorted(q for q in page.quotas_changed if quotas.get(q) is None)
            if gone:
                cur.execute("DELETE FROM billing_quota_groups WHERE quota = ANY(%s)", (gone,))
            cur.executemany(
                "INSERT INTO billing_quota_groups (quota, parent, resource_groups, position, "
                "spec) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (quota) DO UPDATE SET "
                "parent = EXCLUDED.parent, resource_groups = EXCLUDED.resource_groups, "
                "position = EXCLUDED.position, spec = EXCLUDED.spec",
                [
                    (
                        q,
                        entry[0],
                        orjson.dumps(list(entry[1])).decode(),
                        pos,
                        None if entry[2] is None else orjson.dumps(entry[2]).decode(),
                    )
                    for q, pos in sorted(page.quotas_changed.items())
                    if (entry := quotas.get(q)) is not None
                ],
            )
    if page.workloads:
        with driver(conn).cursor() as cur:
            cur.executemany(
                "INSERT INTO billing_workloads VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (job_uid) DO NOTHING",
                list(page.workloads.values()),
            )
    if page.bound:
        with driver(conn).cursor() as cur:
            cur.executemany(
                "INSERT INTO billing_workspace_quotas (workspace, quota, position) "
                "VALUES (%s, %s, %s) ON CONFLICT (workspace) DO UPDATE "
                "SET quota = EXCLUDED.quota, position = EXCLUDED.position",
                [(ws, q, pos) for ws, (q, pos) in sorted(page.bound.items())],
            )
    # one row per occupancy touched: the first start and the first end ever recorded win
    _merge(
        conn,
        billing_occupancies,
        [_occupancy_row(o, halves) for o, halves in page.occupancies.items()],
        _OCC_UPSERT,
    )
    _insert(conn, "billing_prices", page.prices, json=("data",))
    _merge(conn, billing_transactions, list(page.txns.values()), _TXN_INSERT)
    _merge(conn, billing_postings, list(page.postings.values()), _POSTING_INSERT)
    _merge(
        conn, billing_line_totals,
        [(*k[:4], u, precise_decimal(a), k[4]) for k, (u, a) in page.line_totals.items()],
        _LINE_TOTALS,
    )  # fmt: skip
    _merge(
        conn, billing_usage_lines,
        [(*r[:11], precise_decimal(r[11])) for r in page.usage_lines.values()], _USAGE_LINES,
    )  # fmt: skip
    _merge(
        conn, billing_cost_monthly, [(*k, precise_decimal(a)) for k, a in page.monthly.items()],
        _MONTHLY,
    )  # fmt: skip
    if page.rated_to:
        with driver(conn).cursor() as cur:
            cur.execute(
                "UPDATE billing_occupancies o SET rated_to = GREATEST(o.rated_to, v.t) "
                "FROM unnest(%s::text[], %s::timestamptz[]) AS v(o, t) WHERE o.occupancy_id = v.o",
                (list(page.rated_to), list(page.rated_to.values())),
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
    _write_receipts(conn, page)


def _write_receipts(conn: Connection, page: _Page) -> None:
    """Payments and applications once each (a row already there was counted already)."""
    if page.payments:
        fresh = _inserted(conn, "billing_payments", "payment_id", page.payments)
        if fresh:
            conn.execute(
                text(
                    "UPDATE billing_invoices SET paid_minor = paid_minor + :applied_minor "
                    "WHERE invoice_id = :invoice_id"
                ),
                fresh,
            )
    if page.applications:
        fresh = _inserted(conn, "billing_credit_applications", "application_id", page.applications)
        if fresh:
            conn.execute(
                text(
                    "UPDATE billing_invoices SET applied_minor = applied_minor + :amount_minor "
                    "WHERE invoice_id = :invoice_id"
                ),
                fresh,
            )
    if page.returns:
        fresh = _inserted(conn, "billing_credit_returns", "settlement_id", page.returns)
        if fresh:
            conn.execute(
                text(
                    "UPDATE billing_invoices SET returned_minor = returned_minor + :amount_minor "
                    "WHERE invoice_id = :invoice_id"
                ),
                fresh,
            )
    if page.overdue:
        conn.execute(
            text(
                "UPDATE billing_invoices SET overdue_at = :at "
                "WHERE invoice_id = :invoice_id AND overdue_at IS NULL"
            ),
            page.overdue,
        )


def _inserted(
    conn: Connection, table: str, key: str, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Insert ``rows`` (ON CONFLICT DO NOTHING); the ones that were new."""
    cols = list(rows[0])
    fresh = []
    for row in rows:
        done = conn.execute(
            text(
                f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                f"({', '.join(':' + c for c in cols)}) ON CONFLICT DO NOTHING RETURNING {key}"
            ),
            row,
        ).first()
        if done is not None:
            fresh.append(row)
    return fresh


def catch_up_on(uow: UnitOfWork, *, page_size: int = 5000) -> int:
    """Bring the billing projection to the store's head inside the caller's unit of work.

    The rater and the period close call this while holding the store's append
    lock, so what they decide from these tables is exactly what the store holds.
    Same checkpoint and step as the projector runner (``projection:billing``), so
    the two never apply a window twice.
    """
    projection = [BillingProjection()]
    covered = 0
    while step := advance_on(uow, projection, page_size=page_size):
        covered += step
    return covered


def catch_up_billing(store: EventStore) -> int:
    """Bring the billing projection to the head in a transaction of its own: what a write
    use case does around its append (never a read)."""
    return catch_up(store, [BillingProjection()])
