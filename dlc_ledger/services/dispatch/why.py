"""Use cases behind ``jobs why``, ``queue show`` and ``report estimates``: bring the read
models they explain from up to date, take one consistent snapshot, and read.

"Now" is the projected clock (the latest instant a projected fact carries) unless the
caller names an instant: in a replay the cluster's clock is months from the wall's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from dlc_ledger.services.errors import NotFound
from ledger.dispatch import unit_workload
from ledger.errors import Invalid
from ledger.store.base import EventStore
from projections.budgets import exhausted_workspaces
from projections.dispatch import (
    DecisionWindow,
    QueuePage,
    explain_job,
    projected_now,
    queue_listing,
)
from projections.dispatch import estimates_report as estimate_rows
from projections.jobs import find_job, job_state
from projections.quotas import quota_in_scope, quota_subtree
from projections.subscriptions import load_subscriptions

__all__ = ["Exhausted", "estimates_report", "queue_page", "why_job"]

#: the workspaces whose ``stop`` budget is exhausted at an instant; by default the
#: budgets' read model as the dispatcher's last check left it
#: (:func:`projections.budgets.projection.exhausted_workspaces`: a read, it stores no crossing)
Exhausted = Callable[[Connection, datetime], frozenset[str]]


def _now(conn: Connection, at: datetime | None) -> datetime:
    if at is not None:
        return at
    now = projected_now(conn)
    if now is None:
        raise Invalid("no job has been projected yet: nothing to explain")
    return now


def why_job(
    store: EventStore,
    ref: str,
    *,
    at: datetime | None = None,
    exhausted: Exhausted = exhausted_workspaces,
    workspaces: Collection[str] | None = None,
) -> dict[str, Any]:
    """Why job ``ref`` (a uid, or a name only one job has) is pending, was preempted, or
    runs; ``workspaces`` (a caller's scope): a job outside them is not found."""
    bought = list(load_subscriptions(store).values())
    with store.snapshot() as uow:
        conn = uow.connection
        # a service's or notebook's replica (``<uid or name>#<i>``) is found by its workload
        base = unit_workload(ref)
        uid = find_job(conn, base, workspaces=workspaces) + ref[len(base) :]
        now = _now(conn, at)
        doc = explain_job(
            uow,
            uid,
            now,
            blocked_workspaces=exhausted(conn, now),
            as_at=at is not None,
            subscriptions=bought,
        )
        if workspaces is not None:
            _unname_outsiders(conn, doc, workspaces)
        return doc


def _unname_outsiders(conn: Connection, doc: dict[str, Any], workspaces: Collection[str]) -> None:
    """For a scoped caller (whose own job ``doc`` explains): a preemptor or fellow victim
    of another workspace is not named, and the quota states the decisions recorded keep
    only the caller's subtree. The figures of the job's quota's ancestors stay: they are
    totals that say why it waits, and name no job or workspace."""
    subtree = quota_subtree(conn, workspaces) or frozenset()
    preemptions: list[dict[str, Any]] = doc["preemptions"]
    named = {p["preemptor"] for p in preemptions} | {
        v for p in preemptions for v in p["other_victims"]
    }
    s = job_state.c
    visible = set(
        conn.execute(
            select(s.job_uid).where(
                s.job_uid.in_(sorted(n for n in named if n)),
                s.workspace.in_(sorted(workspaces)),
            )
        ).scalars()
    )
    for p in preemptions:
        if p["preemptor"] not in visible:
            p.update(preemptor=None, preemptor_name=None, preemptor_priority=None)
        if p["preemptor_quota"] not in subtree:
            p["preemptor_quota"] = None
        p["other_victims"] = [v for v in p["other_victims"] if v in visible]
        p["state"] = {q: f for q, f in p["state"].items() if q in subtree}
    admission = doc.get("admission")
    if admission:
        admission["state"] = {q: f for q, f in admission["state"].items() if q in subtree}


def queue_page(
    store: EventStore,
    quota: str,
    *,
    at: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
    exhausted: Exhausted = exhausted_workspaces,
    workspaces: Collection[str] | None = None,
) -> QueuePage:
    """One page of ``quota``'s pending queue (its subtree's, for an inner quota) in order;
    ``workspaces`` (a caller's scope): a quota outside their subtree is not found."""
    bought = list(load_subscriptions(store).values())
    with store.snapshot() as uow:
        conn = uow.connection
        if not quota_in_scope(conn, quota, workspaces):
            raise NotFound(f"no quota {quota!r}")
        now = _now(conn, at)
        return queue_listing(
            conn,
            quota,
            now,
            limit=limit,
            cursor=cursor,
            blocked_workspaces=exhausted(conn, now),
            as_at=at is not None,
            subscriptions=bought,
        )


def estimates_report(
    store: EventStore,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    per_job: bool = False,
) -> list[dict[str, Any]]:
    """Stored start estimates and ranges against actual starts (see
    :func:`projections.dispatch.reports.estimates_report`)."""
    with store.snapshot() as uow:
        return estimate_rows(uow.connection, DecisionWindow(start, end), per_job=per_job)
