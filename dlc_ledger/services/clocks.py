"""The cluster clock as the store has seen it, and the defaults commands derive from it.

Cluster time (``occurred_at`` of the watchers' facts) and the wall clock can lie months
apart (a replay's history is virtual), so commands that act "now" — billing runs,
configuration changes — compare the two instead of assuming they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dlc_ledger.services.errors import Conflict
from ledger.canonical import format_timestamp
from ledger.rating import PeriodFn, calendar_months
from ledger.store.base import EventStore
from projections.extent import observed_clock, projected_extent

__all__ = [
    "CLOCK_SKEW",
    "BillingNow",
    "billing_instant",
    "billing_now",
    "observed_cluster_time",
    "projected_cluster_time",
]


def observed_cluster_time(store: EventStore) -> datetime | None:
    """The latest ``occurred_at`` of a cluster fact (a job or node stream) in the store,
    exactly; None if none.

    For commands that act on it right after facts were stored, before the projector has
    folded them (a billing run, a replay's end): the ``extent`` read model plus the events
    after its checkpoint, so it costs a few rows plus what the projector has still to
    fold (everything, on a store it never ran on). Reads that show the read models use
    :func:`projected_cluster_time`."""
    with store.snapshot() as uow:
        return observed_clock(uow)


def projected_cluster_time(store: EventStore) -> datetime | None:
    """The cluster clock as far as the projector has folded it (``/v1/extent``'s
    ``last``): a few rows whatever the store's size or the projector's lag, for reads
    that show the read models (the default instant of ``/v1/month-to-date``); None
    before any cluster fact is folded."""
    with store.reading() as conn:
        return projected_extent(conn).last


#: How far the observed cluster clock may run ahead of the wall clock (skew) before it
#: counts as a virtual one; also how far past the wall clock an explicit ``--until`` may
#: reach on a store without any cluster fact.
CLOCK_SKEW = timedelta(hours=1)


@dataclass(frozen=True)
class BillingNow:
    """The instant a billing run acts at, and why."""

    at: datetime
    observed: datetime | None  # the latest cluster time in the store
    replayed: bool  # True: the cluster clock is a virtual one (a replay's), not the wall's


def billing_now(
    observed: datetime | None, wall: datetime, periods: PeriodFn | None = None
) -> BillingNow:
    """The wall clock, unless the cluster clock lags it by more than a billing period or
    runs ahead of it (a replayed history): then the latest observed cluster time, so the
    periods of that history close, voided invoices are re-issued, and a run never bills
    half of a history that lies in the wall clock's future."""
    if observed is not None:
        period = (periods or calendar_months())(observed)
        if observed + (period.end - period.start) < wall or observed > wall + CLOCK_SKEW:
            return BillingNow(observed, observed, replayed=True)
    return BillingNow(wall, observed, replayed=False)


def billing_instant(
    store: EventStore,
    until: datetime | None,
    *,
    force: bool = False,
    wall: datetime | None = None,
) -> BillingNow:
    """The cluster instant a billing run acts at.

    An explicit ``until`` beyond the latest cluster time observed is refused unless
    ``force``: every open occupancy would be billed up to it, and every period up to it
    closed. On a store without any cluster fact the bound is the wall clock plus
    :data:`CLOCK_SKEW` (else subscriptions would be renewed and future months invoiced).
    Without one: :func:`billing_now` on the wall clock (``wall``, default now).
    """
    observed = observed_cluster_time(store)
    now = wall or datetime.now(UTC)
    if until is None:
        return billing_now(observed, now)
    if force:
        return BillingNow(until, observed, replayed=False)
    if observed is not None and until > observed:
        raise Conflict(
            f"--until {format_timestamp(until)} is beyond the latest cluster time observed "
            f"({format_timestamp(observed)}): open occupancies would be billed and periods "
            "closed up to it; pass --force if that is meant"
        )
    if observed is None and until > now + CLOCK_SKEW:
        raise Conflict(
            f"--until {format_timestamp(until)} is in the future: the store holds no cluster "
            f"fact and the wall clock is {format_timestamp(now)} (at most "
            f"{CLOCK_SKEW} ahead is allowed): subscriptions would be renewed and periods "
            "invoiced up to it; pass --force if that is meant"
        )
    return BillingNow(until, observed, replayed=False)
