"""What the properties of closed books share (issue 47): a store of their own with the demo
book, the month a close by hand names, and the invariant that a closed month is invoiced
whole (tests/e2e/billing/test_period_lock_invariants.py, test_books_close.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal

from dlc_ledger.services.billing import publish_price_book
from ledger.accounts import rounding_transaction_id
from ledger.store.postgres import PostgresEventStore
from projections.billing import ReportWindow, closed_periods, cost_report
from tests.support.billing import at, demo_book, query
from tests.support.databases import TemplateDatabases


@contextmanager
def fresh_store(databases: TemplateDatabases) -> Iterator[PostgresEventStore]:
    """A database of its own (a clone of the migrated template), the demo book published."""
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
        yield store
    finally:
        store.close()
        databases.drop(url)


def month_before(t: datetime) -> str:
    """The month that ended last by ``t`` (``YYYY-MM``): what a close by hand at ``t`` names."""
    first = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    last = first - timedelta(days=1)
    return f"{last.year:04d}-{last.month:02d}"


def assert_closed_months_invoiced(store: PostgresEventStore, *, with_payments: bool) -> None:
    """The trial balance is zero; every receivable posting of a closed month is on exactly
    one issued invoice (an issued invoice's own rounding on none); the ledger's cost of a
    workspace-month is its issued invoices. ``with_payments``: receivable postings without
    a period may exist (payments, credit applied or returned: they belong to an invoice,
    not to a month); without it, every receivable posting has a period."""
    (unbalanced,) = query(store, "SELECT count(*) FROM (SELECT currency FROM billing_postings "
                                 "GROUP BY currency HAVING sum(amount_minor) <> 0) u")  # fmt: skip
    assert unbalanced == (0,)
    with store.snapshot() as uow:
        closed = set(closed_periods(uow))
    issued = query(
        store, "SELECT invoice_id, workspace, period, total_minor FROM billing_invoices "
        "WHERE status = 'issued'",
    )  # fmt: skip
    (posted,) = query(store, "SELECT count(*) FROM billing_transactions WHERE period IS NOT NULL")
    assert closed or posted == (0,), "the final tick closes the months before it"
    roundings = {rounding_transaction_id(r.invoice_id) for r in issued}
    on_lines: dict[str, int] = defaultdict(int)
    for (ids,) in query(
        store, "SELECT l.transaction_ids FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.status = 'issued'",
    ):  # fmt: skip
        for t in ids:
            on_lines[t] += 1
    receivable = query(
        store,
        "SELECT DISTINCT t.transaction_id, t.period, t.memo FROM billing_transactions t "
        "JOIN billing_postings p USING (transaction_id) "
        "WHERE p.account LIKE 'receivable/%' AND p.amount_minor <> 0",
    )
    for txn in receivable:
        if txn.period is None:
            assert with_payments, txn.memo
            continue
        if txn.period not in closed:
            continue
        if txn.transaction_id in roundings:
            assert on_lines[txn.transaction_id] == 0
            continue
        assert on_lines[txn.transaction_id] == 1, (txn.period, txn.memo)
    with store.reading() as conn:
        rows = cost_report(conn, ["workspace", "month"], ReportWindow(), source="ledger")
    cost = {(r["workspace"], r["month"]): r["cost_minor"] for r in rows}
    invoiced: dict[tuple[str, str], int] = defaultdict(int)
    for r in issued:
        invoiced[(r.workspace, r.period)] += int(r.total_minor)
    for key, total in invoiced.items():
        assert cost.get(key, 0) == total, key
    for (ws, month), value in cost.items():
        if month in closed:
            assert invoiced.get((ws, month), 0) == value or Decimal(value) == 0, (ws, month)
