"""Period locks under any sequence (issue 47, Tests): purchases (back-dated ones too),
cancellations, late usage, billing runs and closes by hand; afterwards

- the trial balance is zero;
- every receivable posting of a closed month is on exactly one issued invoice (or is an
  issued invoice's own rounding): nothing is left on a receivable without an invoice;
- ``report cost --source ledger`` equals the issued invoices of every closed month, per
  workspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import close_month, publish_price_book, tick
from dlc_ledger.services.subscriptions import cancel, purchase
from ledger.accounts import rounding_transaction_id
from ledger.errors import Conflict, Invalid
from ledger.store.postgres import PostgresEventStore
from projections.billing import ReportWindow, closed_periods, cost_report
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.databases import TemplateDatabases

ORIGIN = at("2027-09-25T00:00")
WORKSPACES = ("ws-a", "ws-b")
SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Action = tuple[Any, ...]
actions: st.SearchStrategy[Action] = st.one_of(
    # a purchase, dated up to 60 days back (into a closed month, often)
    st.tuples(
        st.just("purchase"),
        st.integers(0, 1),
        st.sampled_from(["month", "year"]),
        st.booleans(),
        st.integers(0, 60 * 24),
    ),
    st.tuples(st.just("cancel"), st.integers(0, 5), st.booleans()),
    # usage recorded late: started hours back, lasting some hours
    st.tuples(st.just("usage"), st.integers(0, 1), st.integers(1, 24 * 50), st.integers(1, 30)),
    st.tuples(st.just("tick")),
    st.tuples(st.just("close")),
)
gaps = st.integers(0, 60 * 24 * 20)  # minutes to the next action
steps = st.lists(st.tuples(gaps, actions), min_size=1, max_size=10)


@contextmanager
def fresh_store(databases: TemplateDatabases) -> Iterator[PostgresEventStore]:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
        yield store
    finally:
        store.close()
        databases.drop(url)


def _month_before(t: datetime) -> str:
    first = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    last = first - timedelta(days=1)
    return f"{last.year:04d}-{last.month:02d}"


def _play(store: PostgresEventStore, plan: list[tuple[int, Action]]) -> datetime:
    now = ORIGIN
    bought: list[str] = []
    for i, (gap, action) in enumerate(plan):
        now += timedelta(minutes=gap)
        kind = action[0]
        try:
            if kind == "purchase":
                _, ws, unit, renews, back = action
                done = purchase(
                    store, group="gpu-t4", spec="ml.t4.2xlarge", nodes=1, term=unit,
                    workspace=WORKSPACES[ws], principal="test", auto_renew=renews,
                    at=now - timedelta(minutes=back), key=f"k{i}",
                )  # fmt: skip
                bought.append(done.subscription.subscription_id)
            elif kind == "cancel" and bought:
                _, which, immediately = action
                cancel(store, bought[which % len(bought)], principal="test",
                       immediately=immediately, at=now)  # fmt: skip
            elif kind == "usage":
                _, ws, back, hours = action
                start = now - timedelta(hours=back)
                end = min(start + timedelta(hours=hours), now)
                store.append(
                    [started(f"o{i}", start, workspace=WORKSPACES[ws]), ended(f"o{i}", end)]
                )
            elif kind == "tick":
                tick(store, now)
            elif kind == "close":
                close_month(store, _month_before(now), principal="test", at=now, force=True)
        except (Conflict, Invalid):
            pass  # refused (a cancel of a cancelled one, a close of an unended month...)
    end = now + timedelta(days=40)
    tick(store, end)
    return end


def _check(store: PostgresEventStore) -> None:
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
    on_lines: dict[str, int] = {}
    for (ids,) in query(
        store, "SELECT l.transaction_ids FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.status = 'issued'",
    ):  # fmt: skip
        for t in ids:
            on_lines[t] = on_lines.get(t, 0) + 1
    receivable = query(
        store,
        "SELECT DISTINCT t.transaction_id, t.period, t.memo FROM billing_transactions t "
        "JOIN billing_postings p USING (transaction_id) "
        "WHERE p.account LIKE 'receivable/%' AND p.amount_minor <> 0",
    )
    for txn in receivable:
        assert txn.period is not None
        if txn.period not in closed:
            continue
        if txn.transaction_id in roundings:
            assert on_lines.get(txn.transaction_id, 0) == 0
            continue
        assert on_lines.get(txn.transaction_id, 0) == 1, (txn.period, txn.memo)
    with store.reading() as conn:
        rows = cost_report(conn, ["workspace", "month"], ReportWindow(), source="ledger")
    cost = {(r["workspace"], r["month"]): r["cost_minor"] for r in rows}
    invoiced: dict[tuple[str, str], int] = {}
    for r in issued:
        invoiced[(r.workspace, r.period)] = invoiced.get((r.workspace, r.period), 0) + int(
            r.total_minor
        )
    for key, total in invoiced.items():
        assert cost.get(key, 0) == total, key
    for (ws, month), value in cost.items():
        if month in closed:
            assert invoiced.get((ws, month), 0) == value or Decimal(value) == 0, (ws, month)


@SETTINGS
@given(plan=steps)
def test_closed_months_are_invoiced_whole(databases: TemplateDatabases, plan: list[Any]) -> None:
    with fresh_store(databases) as store:
        _play(store, plan)
        _check(store)
