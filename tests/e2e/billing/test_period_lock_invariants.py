"""Period locks under any sequence (issue 47, Tests): purchases (back-dated ones too),
cancellations, late usage, billing runs and closes by hand; afterwards

- the trial balance is zero;
- every receivable posting of a closed month is on exactly one issued invoice (or is an
  issued invoice's own rounding): nothing is left on a receivable without an invoice;
- ``report cost --source ledger`` equals the issued invoices of every closed month, per
  workspace.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import close_month, tick
from dlc_ledger.services.subscriptions import cancel, purchase
from ledger.errors import Conflict, Invalid
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, ended, started
from tests.support.closed_books import assert_closed_months_invoiced, fresh_store, month_before
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
                close_month(store, month_before(now), principal="test", at=now, force=True)
        except (Conflict, Invalid):
            pass  # refused (a cancel of a cancelled one, a close of an unended month...)
    end = now + timedelta(days=40)
    tick(store, end)
    return end


@SETTINGS
@given(plan=steps)
def test_closed_months_are_invoiced_whole(databases: TemplateDatabases, plan: list[Any]) -> None:
    with fresh_store(databases) as store:
        _play(store, plan)
        assert_closed_months_invoiced(store, with_payments=False)
