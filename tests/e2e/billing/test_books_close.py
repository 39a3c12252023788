"""The books a finance team closes, as one property (issue 47, Tests): any sequence of
purchases (back-dated too), nodes added mid-term, spec changes, cancellations, late usage,
payments (partial and over), billing runs and closes by hand; after every payment and at
the end:

- a payment never moves revenue or deferred revenue (``revenue/*``, ``deferred/*``);
- the trial balance is zero per currency;
- every receivable posting of a closed month is on exactly one issued invoice (or is an
  issued invoice's own rounding): nothing is left on a receivable without an invoice;
- ``report cost --source ledger`` equals the issued invoices of every closed month;
- each month's journal export is the trial balance's movement over that month, account by
  account, and balances per entry and per currency.

Each part has its own property beside its code (payments, period locks, changes, the
journal); this one runs them together, so that one part's postings cannot break another's
invariant (a payment with no period, a charge moved out of a locked month, an addition's
recognition).
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import close_month, record_payment, tick
from dlc_ledger.services.subscriptions import (
    add_subscription_nodes,
    cancel,
    change_spec,
    purchase,
)
from ledger.errors import Conflict, Invalid, NotFound
from ledger.store.postgres import PostgresEventStore
from projections.billing import (
    catch_up_billing,
    period_bounds,
    read_books,
    read_journal,
)
from tests.support.billing import at, ended, query, started
from tests.support.closed_books import assert_closed_months_invoiced, fresh_store, month_before
from tests.support.databases import TemplateDatabases

ORIGIN = at("2027-09-25T00:00")
WORKSPACES = ("ws-a", "ws-b")
SPECS = (("gpu-t4", "ml.t4.2xlarge"), ("gpu-g2", "ml.g2.8xlarge"))
SETTINGS = settings(
    max_examples=int(os.environ.get("BOOKS_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Action = tuple[Any, ...]
actions: st.SearchStrategy[Action] = st.one_of(
    # a purchase, dated up to 40 days back (into a closed month, often)
    st.tuples(
        st.just("purchase"),
        st.integers(0, 1),
        st.integers(0, 1),
        st.sampled_from(["month", "year"]),
        st.booleans(),
        st.integers(0, 40 * 24 * 60),
    ),
    st.tuples(st.just("add-nodes"), st.integers(0, 5), st.integers(1, 2)),
    st.tuples(st.just("change-spec"), st.integers(0, 5)),
    st.tuples(st.just("cancel"), st.integers(0, 5), st.booleans()),
    # usage recorded late: started hours back, lasting some hours
    st.tuples(st.just("usage"), st.integers(0, 1), st.integers(1, 24 * 40), st.integers(1, 30)),
    # a payment of a share (in percent, over 100: an overpayment) of an issued invoice
    st.tuples(st.just("pay"), st.integers(0, 5), st.sampled_from([30, 100, 150])),
    st.tuples(st.just("tick")),
    st.tuples(st.just("close")),
)
gaps = st.integers(0, 60 * 24 * 20)  # minutes to the next action
steps = st.lists(st.tuples(gaps, actions), min_size=4, max_size=14)
#: after the last run: payments of the invoices issued by then (which, percent), then a run
#: that applies the credit of the overpayments to what is still open
settlements = st.lists(st.tuples(st.integers(0, 5), st.sampled_from([30, 100, 150])), max_size=4)


def _earned(store: PostgresEventStore) -> dict[str, int]:
    """Revenue and deferred revenue, per account (the precise sums)."""
    catch_up_billing(store)
    return {
        account: int(total)
        for account, total in query(
            store,
            "SELECT account, sum(amount_minor) FROM billing_postings "
            "WHERE account LIKE 'revenue/%' OR account LIKE 'deferred/%' GROUP BY account",
        )
    }


def _pay(store: PostgresEventStore, i: int, now: datetime, which: int, percent: int) -> bool:
    """Pay a share of an issued invoice, if there is one; whether there was."""
    catch_up_billing(store)
    issued = query(
        store,
        "SELECT invoice_id, total_minor FROM billing_invoices WHERE status = 'issued' "
        "AND total_minor > 0 ORDER BY period, workspace",
    )
    if not issued:
        return False
    invoice = issued[which % len(issued)]
    minor = max(1, int(invoice.total_minor) * percent // 100)
    before = _earned(store)
    record_payment(
        store,
        invoice.invoice_id,
        f"{Decimal(minor).scaleb(-2):f}",
        now,
        f"bank-{i}",
        principal="test",
    )
    assert _earned(store) == before, "a payment moved revenue"
    return True


def _play(
    store: PostgresEventStore, plan: list[tuple[int, Action]], paid: list[tuple[int, int]]
) -> datetime:
    now = ORIGIN
    bought: list[str] = []
    for i, (gap, action) in enumerate(plan):
        now += timedelta(minutes=gap)
        kind = action[0]
        try:
            if kind == "purchase":
                _, ws, spec, unit, renews, back = action
                group, name = SPECS[spec]
                done = purchase(
                    store, group=group, spec=name, nodes=1, term=unit,
                    workspace=WORKSPACES[ws], principal="test", auto_renew=renews,
                    at=now - timedelta(minutes=back), key=f"k{i}",
                )  # fmt: skip
                bought.append(done.subscription.subscription_id)
            elif kind == "add-nodes" and bought:
                _, which, nodes = action
                add_subscription_nodes(store, bought[which % len(bought)], nodes=nodes,
                                       key=f"k{i}", principal="test", at=now)  # fmt: skip
            elif kind == "change-spec" and bought:
                sub = bought[action[1] % len(bought)]
                (spec,) = query(
                    store, "SELECT data->>'spec' FROM events WHERE type = 'SubscriptionPurchased' "
                    "AND data->>'subscription_id' = :s", s=sub,
                )  # fmt: skip
                group, name = next(s for s in SPECS if s[1] != spec[0])
                changed = change_spec(store, sub, spec=name, group=group, key=f"k{i}",
                                      principal="test", at=now)  # fmt: skip
                bought.append(changed.new.subscription_id)
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
            elif kind == "pay" and _pay(store, i, now, action[1], action[2]):
                pass
            elif kind == "tick":
                tick(store, now)
            elif kind == "close":
                close_month(store, month_before(now), principal="test", at=now, force=True)
            else:
                continue
        except (Conflict, Invalid, NotFound):
            # refused: a cancel of a cancelled one, a close of an unended month...
            event(f"{kind} refused")
            continue
        event(kind)  # what the examples exercise: pytest --hypothesis-show-statistics
    end = now + timedelta(days=40)
    tick(store, end)
    for j, (which, percent) in enumerate(paid):
        if _pay(store, 1000 + j, end, which, percent):
            event("settled")
    end += timedelta(days=1)
    tick(store, end)
    return end


def _months(first: datetime, last: datetime) -> list[str]:
    out: list[str] = []
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        out.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def _check_journal(store: PostgresEventStore, end: datetime) -> None:
    scale_of = lambda currency: 2  # noqa: E731
    with store.reading() as conn:
        for period in _months(ORIGIN - timedelta(days=45), end):
            start, stop = period_bounds(period)
            found = read_journal(conn, scale_of, period)
            before = {
                r["account"]: Decimal(r["balance"])
                for r in read_books(conn, scale_of, start).balance.rows
            }
            after = {
                r["account"]: Decimal(r["balance"])
                for r in read_books(conn, scale_of, stop).balance.rows
            }
            moved: dict[str, Decimal] = defaultdict(Decimal)
            entries: dict[str, Decimal] = defaultdict(Decimal)
            for line in found.lines:
                moved[line["account"]] += Decimal(line["amount_precise"])
                debit, credit = Decimal(line["debit"] or 0), Decimal(line["credit"] or 0)
                entries[line["journal_id"]] += debit - credit
            for account in set(after) | set(moved):
                assert moved[account] == after.get(account, 0) - before.get(account, 0), (
                    period,
                    account,
                )
            assert set(entries.values()) <= {Decimal(0)}, period
            assert all(t["balanced"] for t in found.totals), period


@SETTINGS
@given(plan=steps, paid=settlements)
def test_the_books_close_whatever_finance_does(
    databases: TemplateDatabases, plan: list[Any], paid: list[tuple[int, int]]
) -> None:
    with fresh_store(databases) as store:
        end = _play(store, plan, paid)
        assert_closed_months_invoiced(store, with_payments=True)
        _check_journal(store, end)
