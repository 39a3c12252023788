"""The cluster clock as the store has seen it, and the defaults commands derive from it.

Cluster time (``occurred_at`` of the watchers' facts) and the wall clock can lie months
apart (a replay's history is virtual), so commands that act "now" — billing runs,
configuration changes — compare the two instead of assuming they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from ledger.rating import PeriodFn, calendar_months
from ledger.store.postgres import PostgresEventStore

__all__ = ["BillingNow", "billing_now", "observed_cluster_time"]


def observed_cluster_time(store: PostgresEventStore) -> datetime | None:
    """The latest ``occurred_at`` of a cluster fact (a job or node stream); None if none."""
    with store.engine.connect() as conn:
        value = conn.execute(
            text(
                "SELECT max(occurred_at) FROM events "
                "WHERE stream LIKE 'job/%' OR stream LIKE 'node/%'"
            )
        ).scalar_one()
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class BillingNow:
    """The instant a billing run acts at, and why."""

    at: datetime
    observed: datetime | None  # the latest cluster time in the store
    replayed: bool  # True: the cluster clock lags the wall clock by more than a period


def billing_now(
    observed: datetime | None, wall: datetime, periods: PeriodFn | None = None
) -> BillingNow:
    """The wall clock, unless the cluster clock lags it by more than a billing period
    (a replayed history): then the latest observed cluster time, so periods of that
    history still close and voided invoices are re-issued."""
    if observed is not None:
        period = (periods or calendar_months())(observed)
        if observed + (period.end - period.start) < wall:
            return BillingNow(observed, observed, replayed=True)
    return BillingNow(wall, observed, replayed=False)
