"""Why is a job pending, or why was it preempted: the reads behind ``jobs why`` and
``queue show``.

Everything is read from projected state (the dispatcher's own input,
:func:`projections.dispatch_reads.read_dispatch`) and the stored decision events, and
explained with the decision core itself: positions and the tiered reason from one
:func:`~ledger.dispatch.cycle.plan_cycle` at ``now``, the quota figures from its capacity
arithmetic (:mod:`ledger.dispatch.figures`), the start estimate from a forward simulation
(:mod:`ledger.dispatch.estimates`).

Start estimates and the expected run times behind them: :mod:`projections.dispatch_estimates`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from ledger.canonical import format_timestamp
from ledger.dispatch.cycle import CycleResult, PendingStatus, QueueSettings, plan_cycle
from ledger.dispatch.estimates import (
    MAX_STEPS,
    StartEstimate,
    ever_fits,
    within_tree,
)
from ledger.dispatch.figures import blocking_figures
from ledger.dispatch.model import Incoming, QuotaNode
from ledger.dispatch.queues import effective_priority
from ledger.money import plain_decimal, precise_decimal, round_precise
from ledger.prices import NoApplicableRate
from ledger.rating import Occupancy, rate_interval
from ledger.store.base import RecordedEvent, UnitOfWork
from projections.billing_reads import load_schedule
from projections.dispatch_estimates import (
    Runtime,
    projected_ends,
    runtime_medians,
    start_estimates,
)
from projections.dispatch_reads import DispatchView, read_dispatch
from projections.jobs.queries import timeline_rows
from projections.jobs.tables import job_state
from projections.occupancy import occupancy
from projections.pages import check_limit, decode_cursor, encode_cursor

__all__ = [
    "PREEMPTION_RULES",
    "REASONS",
    "QueuePage",
    "explain_job",
    "jsonable",
    "queue_listing",
    "tiered_reason",
]

#: what each tiered pending reason means, for people
REASONS: Mapping[str, str] = {
    "ExceedsMaxQuota": "it can never fit as configured: the request exceeds what its quota "
    "could ever get (its max, or its ancestors' capacity) even with nothing else running",
    "WaitingForQuota": "it fits once jobs ahead of it finish",
    "PreemptionPending": "jobs are being stopped to make room for it; it starts once they have",
    "BudgetExhausted": "its workspace's budget (action stop) is exhausted: nothing of it is "
    "admitted until the next period or a raised budget",
    "Parked": "BestEffortFIFO parked it after it failed at the head of its queue; it is "
    "retried when capacity frees in its tree or the tree changes",
}

#: what each preemption rule (a victim's reason) means, for people
PREEMPTION_RULES: Mapping[str, str] = {
    "WithinQuota": "a higher-priority job of the same quota took its place "
    "(within-quota preemption)",
    "Reclaim": "its quota was borrowing, and a quota lending to it took its guarantee back "
    "(reclaim)",
    "ReclaimWhileBorrowing": "a higher-priority job of another quota took it while itself "
    "borrowing (borrow within cohort)",
    "FairSharing": "fair sharing: its quota's share was above the preemptor's",
}


def tiered_reason(status: PendingStatus, job: Incoming, quotas: tuple[QuotaNode, ...]) -> str:
    """The cycle's pending reason, sharpened: a job waiting for quota that cannot fit even
    with nothing else admitted is ``ExceedsMaxQuota``."""
    if status.reason == "WaitingForQuota" and not ever_fits(quotas, job):
        return "ExceedsMaxQuota"
    return status.reason


def _estimate_json(estimate: StartEstimate | None, now: datetime) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "start": estimate.start,
        "in_seconds": (None if estimate.start is None else (estimate.start - now).total_seconds()),
        "basis": estimate.basis,
        "steps": estimate.steps,
        "released": estimate.released,
    }


# --- queue show ---------------------------------------------------------------------


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


def queue_listing(
    conn: Connection,
    quota: str,
    now: datetime,
    *,
    limit: int = 50,
    cursor: str | None = None,
    max_steps: int = MAX_STEPS,
    blocked_workspaces: frozenset[str] = frozenset(),
) -> QueuePage:
    """The pending jobs of ``quota`` (a leaf) or of its whole subtree (an inner quota), in
    the order the dispatcher would try them now (their tree's cohort order)."""
    check_limit(limit)
    after = decode_cursor(cursor, int, str)[0] if cursor is not None else 0
    view = read_dispatch(conn, now, blocked_workspaces=blocked_workspaces)
    if quota not in {q.name for q in view.cycle.quotas}:
        names = ", ".join(sorted(q.name for q in view.cycle.quotas)) or "none"
        raise ValueError(f"unknown quota {quota!r} (quotas: {names})")
    leaves = set(_leaves_under(view, quota))
    result = plan_cycle(within_tree(view.cycle, quota))
    statuses = sorted(
        (s for s in result.pending if s.quota in leaves), key=lambda s: s.cohort_position
    )
    statuses = [s for s in statuses if s.cohort_position > after]
    page, more = statuses[:limit], len(statuses) > limit
    medians = runtime_medians(conn)
    estimates = start_estimates(view, medians, [s.job for s in page], max_steps=max_steps)
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
                "quota": s.quota,
                "priority": job.priority,
                "effective_priority": effective_priority(job, settings, now),
                "queued_at": job.created_at,
                "waited_seconds": max(0.0, (now - job.created_at).total_seconds()),
                "reason": tiered_reason(s, job, view.cycle.quotas),
                "request": {k: _number(v) for k, v in job.resources.items()},
                "estimated_start": estimate.start if estimate else None,
                "estimate_basis": estimate.basis if estimate else None,
            }
        )
    next_cursor = encode_cursor([page[-1].cohort_position, page[-1].job]) if more else None
    return QueuePage(rows, next_cursor, now, tuple(sorted(leaves)))


# --- jobs why -----------------------------------------------------------------------


def _decision_events(uow: UnitOfWork, uid: str) -> list[RecordedEvent]:
    """The decision events naming job ``uid`` (on any stream), in its timeline's order."""
    rows = timeline_rows(uow, uid)
    positions = [int(r[1]) for r in rows if r[3] in ("AdmissionDecided", "PreemptionDecided")]
    by_position = {e.position: e for e in uow.read_positions(positions)}
    return [by_position[p] for p in positions if p in by_position]


def _lost_work(
    conn: Connection, uid: str, decided_at: datetime, now: datetime
) -> list[dict[str, Any]]:
    """The job's occupancies open when a preemption of it was decided: the work since its
    pods last started, lost, each as [start, its end, or now while still releasing)."""
    o = occupancy.c
    rows = conn.execute(
        select(occupancy).where(
            o.job_uid == uid,
            o.started_at.is_not(None),
            o.started_at <= decided_at,
            (o.ended_at.is_(None)) | (o.ended_at >= decided_at),
        )
    ).all()
    return [dict(r._mapping) | {"until": r.ended_at or max(now, r.started_at)} for r in rows]


def _lost_cost(conn: Connection, lost: list[dict[str, Any]]) -> dict[str, Any]:
    """GPU-hours and their cost at the job's rate (its billing mode, the price book then)."""
    mgpu_seconds = sum(
        int(r["mgpu"] or 0) * (r["until"] - r["started_at"]).total_seconds() for r in lost
    )
    out: dict[str, Any] = {
        "lost_seconds": max(
            ((r["until"] - r["started_at"]).total_seconds() for r in lost), default=0.0
        ),
        "lost_gpu_hours": round(mgpu_seconds / 1000 / 3600, 6),
        "currency": None,
        "lost_cost_minor": None,
        "lost_cost_minor_precise": None,
    }
    schedule = load_schedule(conn)
    if schedule.currency is None or not lost:
        return out
    precise = 0
    for r in lost:
        occ = Occupancy(
            occupancy_id=r["occupancy_id"],
            job_uid=r["job_uid"],
            workspace=r["workspace"] or "",
            flavor=r["flavor"] or "gpu/any",
            mgpu=int(r["mgpu"] or 0),
            cpu_milli=int(r["cpu_milli"] or 0),
            memory_mib=int(r["memory_mib"] or 0),
            billing_mode=r["billing_mode"] or "public",
            start=r["started_at"],
            end=r["until"],
            quota=r["quota"],
            user=r["user"] or "unknown",
        )
        try:
            precise += rate_interval(occ, schedule, occ.start, r["until"]).total_precise
        except NoApplicableRate:
            return out
    out["currency"] = schedule.currency
    out["lost_cost_minor"] = round_precise(precise)
    out["lost_cost_minor_precise"] = Decimal(plain_decimal(precise_decimal(precise)))
    return out


def _preemptions(
    conn: Connection, uid: str, events: list[RecordedEvent], now: datetime
) -> list[dict[str, Any]]:
    """Each time job ``uid`` was preempted (a decision repeated by the same preemptor
    before the job ran again counts once, at the first)."""
    out: list[dict[str, Any]] = []
    for event in events:
        data = event.data
        if event.type != "PreemptionDecided" or data.get("preemptor") == uid:
            continue
        mine = next((v for v in data.get("victims", ()) if v.get("job_uid") == uid), None)
        if mine is None:
            continue
        preemptor = data.get("preemptor")
        if (
            out
            and out[-1]["preemptor"] == preemptor
            and not _restarted(conn, uid, out[-1]["decided_at"], event.occurred_at)
        ):
            continue  # the same preemption decided again while the job still released
        who = conn.execute(
            select(job_state.c.name, job_state.c.priority, job_state.c.quota).where(
                job_state.c.job_uid == preemptor
            )
        ).first()
        rule = str(mine.get("reason") or data.get("reason") or "")
        out.append(
            {
                "decided_at": event.occurred_at,
                "preemptor": preemptor,
                "preemptor_name": who.name if who else None,
                "preemptor_priority": who.priority if who else None,
                "preemptor_quota": data.get("quota") or (who.quota if who else None),
                "rule": rule,
                "rule_text": PREEMPTION_RULES.get(rule, rule),
                "victim_quota": mine.get("quota"),
                "other_victims": [
                    v.get("job_uid") for v in data.get("victims", ()) if v.get("job_uid") != uid
                ],
                "state": data.get("state", {}),
                **_lost_cost(conn, _lost_work(conn, uid, event.occurred_at, now)),
            }
        )
    return out


def _restarted(conn: Connection, uid: str, after: datetime, upto: datetime) -> bool:
    """Whether a pod of job ``uid`` started in (``after``, ``upto``]."""
    o = occupancy.c
    found = conn.execute(
        select(o.occupancy_id)
        .where(o.job_uid == uid, o.started_at > after, o.started_at <= upto)
        .limit(1)
    ).first()
    return found is not None


def _admission(events: list[RecordedEvent]) -> dict[str, Any] | None:
    admits = [
        e for e in events if e.type == "AdmissionDecided" and e.data.get("outcome") == "admit"
    ]
    if not admits:
        return None
    event = admits[-1]
    return {
        "decided_at": event.occurred_at,
        "quota": event.data.get("quota"),
        "borrowing": bool(event.data.get("borrowing")),
        "state": event.data.get("state", {}),
    }


def _last_pending(events: list[RecordedEvent], attempt: int) -> dict[str, Any] | None:
    """The dispatcher's latest pending decision about the job's current wait."""
    pending = [
        e
        for e in events
        if e.type == "AdmissionDecided"
        and e.data.get("outcome") == "pending"
        and int(e.data.get("attempt", 0)) == attempt
    ]
    if not pending:
        return None
    data = pending[-1].data
    return {
        "decided_at": pending[-1].occurred_at,
        "reason": data.get("reason"),
        "position": data.get("position"),
        "cohort_position": data.get("cohort_position"),
        "estimated_start": data.get("estimated_start"),
    }


def _pending_part(
    conn: Connection,
    view: DispatchView,
    uid: str,
    now: datetime,
    events: list[RecordedEvent],
    max_steps: int,
) -> dict[str, Any]:
    job = next(p for p in view.cycle.pending if p.job == uid)
    tree = within_tree(view.cycle, job.quota)
    result: CycleResult = plan_cycle(tree)
    status: PendingStatus | None = next((s for s in result.pending if s.job == uid), None)
    admitted_now = any(d.job == uid for d in result.admissions)
    medians = runtime_medians(conn)
    estimate = start_estimates(view, medians, [uid], max_steps=max_steps).get(uid)
    own = medians.of(job.quota, job.workspace)
    figures = blocking_figures(tree.quotas, tree.admitted, job)
    if status is not None:
        reason: str | None = tiered_reason(status, job, tree.quotas)
    elif admitted_now:
        reason = None
    else:
        reason = "PreemptionPending"  # it preempts this cycle: it starts after its victims
    queue_length = sum(1 for s in result.pending if s.quota == job.quota)
    return {
        "reason": reason,
        "reason_text": (
            REASONS.get(reason, reason)
            if reason
            else "it fits now: the dispatcher admits it at its next cycle"
        ),
        "position": status.position if status else None,
        "queue_length": queue_length,
        "cohort_position": status.cohort_position if status else None,
        "cohort_length": len(result.pending),
        "queued_at": job.created_at,
        "waited_seconds": max(0.0, (now - job.created_at).total_seconds()),
        "priority": job.priority,
        "effective_priority": effective_priority(
            job, view.cycle.queues.get(job.quota, QueueSettings()), now
        ),
        "request": {k: _number(v) for k, v in job.resources.items()},
        "figures": [
            {
                "quota": f.quota,
                "key": f.key,
                "request": _number(f.request),
                "min": _number(f.min),
                "max": None if f.max is None else _number(f.max),
                "used": _number(f.used),
                "available": _number(f.available),
                "capacity": _number(f.capacity),
                "short": f.short,
            }
            for f in figures
        ],
        "estimate": _estimate_json(estimate, now),
        "estimate_method": _method(estimate, own),
        "runtime": own.as_json() if own else None,
        "last_decision": _last_pending(events, view.jobs[uid].attempt if uid in view.jobs else 0),
    }


def _number(value: float) -> float | int:
    """Quantities are whole units (mGPU, milli-cores, MiB): shown without a ``.0``."""
    return int(value) if float(value).is_integer() else value


def _method(estimate: StartEstimate | None, own: Runtime | None) -> str:
    if estimate is None:
        return "no estimate"
    basis = estimate.basis
    if basis == "now":
        return "it fits now"
    if basis == "never":
        return "none: it does not fit even once everything else has ended"
    if basis == "budget":
        return "none: its workspace's budget is exhausted"
    if basis == "unknown":
        return (
            "none: it waits for running jobs whose end cannot be projected "
            "(no job has finished yet)"
        )
    if basis == "horizon":
        return f"none within {estimate.steps} simulated cycles"
    runtime = f"; its own run time: {own.describe()}" if own else ""
    return (
        f"simulated the dispatcher forward over {estimate.steps} instant(s): "
        f"{estimate.released} running job(s) released at their projected ends (start + the "
        f"median run time of finished jobs of their quota, else workspace, else all){runtime}"
    )


def explain_job(
    uow: UnitOfWork,
    uid: str,
    now: datetime,
    *,
    max_steps: int = MAX_STEPS,
    blocked_workspaces: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Why job ``uid`` is where it is at ``now``: pending (reason, positions, figures, start
    estimate), preempted (by whom, which rule, the state then, work lost and its cost),
    running or finished (its admission decision). ``blocked_workspaces``: those whose
    ``stop`` budget is exhausted (as the live loop is given them)."""
    conn: Connection = uow.connection
    row = conn.execute(job_state.select().where(job_state.c.job_uid == uid)).first()
    if row is None:
        raise ValueError(f"no job with uid {uid!r}")
    events = _decision_events(uow, uid)
    view = read_dispatch(conn, now, blocked_workspaces=blocked_workspaces)
    known = view.jobs.get(uid)
    pending = any(p.job == uid for p in view.cycle.pending)
    preemptions = _preemptions(conn, uid, events, now)
    status = row.status
    doc: dict[str, Any] = {
        "job_uid": uid,
        "name": row.name,
        "status": status,
        "status_since": row.status_since,
        "quota": (known.quota if known else None) or row.quota,
        "workspace": row.workspace,
        "priority": row.priority,
        "billing_mode": row.billing_mode,
        "now": now,
    }
    if pending:
        doc["answer"] = "pending"
        doc["pending"] = _pending_part(conn, view, uid, now, events, max_steps)
    elif known is not None and known.pending and known.quota is None:
        doc["answer"] = "unplaced"
        doc["summary"] = (
            "it waits in no quota the dispatcher knows: its quota (or its workspace's "
            "binding) is not a leaf of the quota tree"
        )
    elif status in ("Succeeded", "Failed", "Stopped"):
        doc["answer"] = "finished"
    elif status == "Preempted":
        doc["answer"] = "preempted"
        doc["summary"] = "preempted: its pods are being stopped; it queues again once they are gone"
    elif status in ("Creating",):
        doc["answer"] = "not queued"
        doc["summary"] = "it was not created suspended: the dispatcher does not queue it"
    else:
        doc["answer"] = "running" if status in ("Running", "Restarting", "Stopping") else "admitted"
        doc.update(_projected_end(conn, view, uid))
    doc["admission"] = _admission(events)
    doc["preemptions"] = preemptions
    doc.setdefault("summary", _summary(doc))
    return doc


def _projected_end(conn: Connection, view: DispatchView, uid: str) -> dict[str, Any]:
    """When an admitted job is expected to end, as the start estimates of others assume."""
    wl = next((a for a in view.cycle.admitted if a.job == uid), None)
    if wl is None:
        return {"projected_end": None, "runtime": None}
    medians = runtime_medians(conn)
    ran = max(0.0, (view.cycle.now - wl.admitted_at).total_seconds())
    runtime = medians.of(wl.quota, wl.workspace, ran=ran)
    return {
        "projected_end": projected_ends((wl,), medians, view.cycle.now).get(uid),
        # None with a projected end: it ran longer than any finished job, as long again
        "runtime": runtime.as_json() if runtime is not None else None,
    }


def _summary(doc: dict[str, Any]) -> str:
    answer = doc["answer"]
    if answer == "pending":
        p = doc["pending"]
        where = (
            f"position {p['position']} of {p['queue_length']} in quota {doc['quota']}, "
            f"{p['cohort_position']} of {p['cohort_length']} in its tree"
            if p["position"] is not None
            else f"quota {doc['quota']}"
        )
        est = p["estimate"]
        start = (
            f"; estimated start {format_timestamp(est['start'])}"
            if est and est["start"] is not None
            else ""
        )
        reason = p["reason"] or "fits now"
        again = " (preempted before, pending again)" if doc["preemptions"] else ""
        return f"pending{again}: {reason}, {where}{start}"
    admission = doc.get("admission")
    admitted = (
        f"admitted at {format_timestamp(admission['decided_at'])} in quota {admission['quota']}"
        + (" (borrowing)" if admission["borrowing"] else "")
        if admission
        else "no admission decision stored (started before the dispatcher or outside it)"
    )
    preempted = f"; preempted {len(doc['preemptions'])} time(s)" if doc["preemptions"] else ""
    end = doc.get("projected_end")
    ending = f"; projected end {format_timestamp(end)}" if end else ""
    return f"{answer} ({doc['status']}): {admitted}{preempted}{ending}"


def jsonable(value: Any) -> Any:
    """``value`` with datetimes as ISO-8601 text, recursively (for the JSON format)."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
