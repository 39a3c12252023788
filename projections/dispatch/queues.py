"""``queue show``: a quota's pending jobs (an inner quota: its subtree's) in the order the
dispatcher tries them, each with its place, reason and estimated start, from the
dispatcher's own input and one :func:`~ledger.dispatch.cycle.plan_cycle` at ``now``."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ledger.dispatch.cycle import QueueSettings, plan_cycle
from ledger.dispatch.estimates import MAX_STEPS, within_tree
from ledger.dispatch.queues import effective_priority
from ledger.errors import NotFound
from ledger.subscriptions import Subscription
from projections.dispatch.estimates import run_times, start_estimates
from projections.dispatch.explain import tiered_reason, whole
from projections.dispatch.reads import DispatchView, read_dispatch
from projections.pages import check_limit, decode_cursor, encode_cursor

__all__ = ["QueuePage", "queue_listing"]


@dataclass(frozen=True)
class QueuePage:
    """One page of a queue in policy order; ``next_cursor`` continues it."""

    rows: list[dict[str, Any]]
    next_cursor: str | None
    now: datetime
    #: the subtree's leaf quotas listed
    quotas: tuple[str, ...]


def _leaves_under(view: DispatchView, quota: str) -> tuple[str, ...]:
    children: dict[str, list[str]] = {}
    for q in view.cycle.quotas:
        if q.parent is not None:
            children.setdefault(q.parent, []).append(q.name)
    out: list[str] = []
    stack = [quota]
    while stack:
        name = stack.pop()
        kids = children.get(name, [])
        if not kids:
            out.append(name)
        stack.extend(reversed(kids))
    return tuple(out)


def _inner_under(view: DispatchView, quota: str) -> set[str]:
    """``quota`` and the quotas below it that have children."""
    parents = {q.name: q.parent for q in view.cycle.quotas}
    inner = {p for p in parents.values() if p is not None}
    out: set[str] = set()
    for name in inner:
        node: str | None = name
        while node is not None and node != quota:
            node = parents.get(node)
        if node == quota:
            out.add(name)
    return out


def queue_listing(
    conn: Connection,
    quota: str,
    now: datetime,
    *,
    limit: int = 50,
    cursor: str | None = None,
    max_steps: int = MAX_STEPS,
    blocked_workspaces: frozenset[str] = frozenset(),
    as_at: bool = False,
    subscriptions: Collection[Subscription] = (),
) -> QueuePage:
    """The pending jobs of ``quota`` (a leaf) or of its whole subtree (an inner quota), in
    the order the dispatcher would try them now (their tree's cohort order). ``as_at``:
    ``now`` is a past instant, the queue as it stood then (:func:`read_dispatch`)."""
    check_limit(limit)
    after = decode_cursor(cursor, int, str)[0] if cursor is not None else 0
    view = read_dispatch(
        conn, now, blocked_workspaces=blocked_workspaces, as_at=as_at, subscriptions=subscriptions
    )
    if quota not in {q.name for q in view.cycle.quotas}:
        names = ", ".join(sorted(q.name for q in view.cycle.quotas)) or "none"
        raise NotFound(f"unknown quota {quota!r} (quotas: {names})")
    leaves = set(_leaves_under(view, quota))
    # an inner quota's own workloads (services on a parent quota) queue under it too
    under = leaves | _inner_under(view, quota)
    result = plan_cycle(within_tree(view.cycle, quota))
    statuses = sorted(
        (s for s in result.pending if s.quota in under), key=lambda s: s.cohort_position
    )
    statuses = [s for s in statuses if s.cohort_position > after]
    page, more = statuses[:limit], len(statuses) > limit
    times = run_times(conn, view.jobs)
    estimates = start_estimates(view, times, [s.job for s in page], max_steps=max_steps)
    incoming = {p.job: p for p in view.cycle.pending}
    rows = []
    for s in page:
        job = incoming[s.job]
        known = view.jobs.get(s.job)
        settings = view.cycle.queues.get(s.quota, QueueSettings())
        estimate = estimates.get(s.job)
        rows.append(
            {
                "position": s.position,
                "cohort_position": s.cohort_position,
                "job_uid": s.job,
                "name": known.name if known else s.job,
                "workspace": job.workspace,
                "quota": s.quota,
                "priority": job.priority,
                "effective_priority": effective_priority(job, settings, now),
                "queued_at": job.created_at,
                "waited_seconds": max(0.0, (now - job.created_at).total_seconds()),
                "reason": tiered_reason(s, job, view.cycle.quotas),
                "request": {k: whole(v) for k, v in job.resources.items()},
                "estimated_start": estimate.start if estimate else None,
                "estimated_start_low": estimate.low if estimate else None,
                "estimated_start_high": estimate.high if estimate else None,
                "estimate_basis": estimate.basis if estimate else None,
            }
        )
    next_cursor = encode_cursor([page[-1].cohort_position, page[-1].job]) if more else None
    return QueuePage(rows, next_cursor, now, tuple(sorted(leaves)))
