"""Use cases behind ``jobs why``, ``queue show`` and ``report estimates``: bring the read
models they explain from up to date, take one consistent snapshot, and read.

"Now" is the projected clock (the latest instant a projected fact carries) unless the
caller names an instant: in a replay the cluster's clock is months from the wall's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from consumers.projector import catch_up_to_read
from ledger.store.postgres import PostgresEventStore
from projections.billing import BillingProjection
from projections.dispatch_decisions import DispatchDecisionsProjection
from projections.dispatch_estimates import estimate_errors, projected_now
from projections.dispatch_explain import QueuePage, explain_job, queue_listing
from projections.jobs import JobsProjection, find_job
from projections.occupancy import OccupancyProjection
from projections.quotas import QuotaProjection

__all__ = ["estimates_report", "queue_page", "why_job"]


def _catch_up(store: PostgresEventStore) -> None:
    catch_up_to_read(
        store,
        [
            JobsProjection(),
            OccupancyProjection(),
            QuotaProjection(),
            BillingProjection(),
            DispatchDecisionsProjection(),
        ],
    )


def _now(conn: Any, at: datetime | None) -> datetime:
    if at is not None:
        return at
    now = projected_now(conn)
    if now is None:
        raise ValueError("no job has been projected yet: nothing to explain")
    return now


def why_job(store: PostgresEventStore, ref: str, *, at: datetime | None = None) -> dict[str, Any]:
    """Why job ``ref`` (a uid, or a name only one job has) is pending, was preempted, or runs."""
    _catch_up(store)
    with store.snapshot() as uow:
        uid = find_job(uow.connection, ref)
        return explain_job(uow, uid, _now(uow.connection, at))


def queue_page(
    store: PostgresEventStore,
    quota: str,
    *,
    at: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> QueuePage:
    """One page of ``quota``'s pending queue (its subtree's, for an inner quota) in order."""
    _catch_up(store)
    with store.snapshot() as uow:
        conn = uow.connection
        return queue_listing(conn, quota, _now(conn, at), limit=limit, cursor=cursor)


def estimates_report(
    store: PostgresEventStore,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    per_job: bool = False,
) -> list[dict[str, Any]]:
    """Stored start estimates against actual starts (see :func:`estimate_errors`)."""
    with store.snapshot() as uow:
        return estimate_errors(uow, start=start, end=end, per_job=per_job)
