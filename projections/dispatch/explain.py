"""Why is a job pending, or why was it preempted: the read behind ``jobs why``.

Everything is read from projected state (the dispatcher's own input,
:func:`projections.dispatch.reads.read_dispatch`) and the stored decision events, and
explained with the decision core itself: positions and the tiered reason from one
:func:`~ledger.dispatch.cycle.plan_cycle` at ``now``, the quota figures from its capacity
arithmetic (:mod:`ledger.dispatch.figures`), the start estimate from a forward simulation
(:mod:`ledger.dispatch.estimates`).

Start estimates and the expected run times behind them: :mod:`projections.dispatch.estimates`;
preemptions and the work they cost: :mod:`projections.dispatch.losses`; the queue listing:
:mod:`projections.dispatch.queues`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ledger.canonical import format_timestamp
from ledger.dispatch import unit_workload
from ledger.dispatch.cycle import CycleResult, PendingStatus, QueueSettings, plan_cycle
from ledger.dispatch.estimates import (
    MAX_STEPS,
    RANGE_QUANTILES,
    RANGE_SAMPLES,
    StartEstimate,
    ever_fits,
    within_tree,
)
from ledger.dispatch.figures import blocking_figures
from ledger.dispatch.model import Incoming, QuotaNode
from ledger.dispatch.queues import effective_priority
from ledger.dispatch.runtimes import RunTime
from ledger.dispatch.workloads import SPILLOVER_REASON
from ledger.errors import Invalid, NotFound
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.subscriptions import Subscription
from projections.dispatch.estimates import (
    describe_runtime,
    projected_ends,
    run_times,
    runtime_json,
    start_estimates,
)
from projections.dispatch.losses import preemptions_of
from projections.dispatch.reads import DispatchView, read_dispatch
from projections.jobs import job_state, parse_time, status_at, timeline_rows

__all__ = ["REASONS", "REFUSALS", "explain_job", "jsonable", "tiered_reason", "whole"]

#: what each tiered pending reason means, for people
REASONS: Mapping[str, str] = {
    "ExceedsMaxQuota": "it can never fit as configured: the request exceeds what its quota "
    "could ever get (its max, or its ancestors' capacity) even with nothing else running",
    "WaitingForQuota": "it fits once jobs ahead of it finish",
    "PreemptionPending": "jobs are being stopped to make room for it; it starts once they have",
    "BudgetExhausted": "its workspace's budget (action stop) is exhausted: nothing of it is "
    "admitted until the next period or a raised budget",
    "SubscriptionExpired": "its quota draws on resource groups with no subscribed capacity "
    "left (the subscriptions expired or were cancelled): nothing of it is admitted onto "
    "released capacity until nodes are bought again; running jobs are stopped 24 hours "
    "after expiry",
    "Parked": "BestEffortFIFO parked it after it failed at the head of its queue; it is "
    "retried when capacity frees in its tree or the tree changes",
}

#: why a notebook was refused at start (it is not queued: interactive work never waits
#: behind batch), for people
REFUSALS: Mapping[str, str] = {
    "InsufficientQuota": "it did not fit when it was started, even with the preemption its "
    "quota's policies allow",
    "ExceedsMaxQuota": "it can never fit as configured: the request exceeds what its quota "
    "could ever get",
    "BudgetExhausted": "its workspace's budget (action stop) is exhausted",
    "SubscriptionExpired": "its quota's subscribed capacity has expired",
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
        # the range: the low and high percentile start of the simulated futures
        "low": estimate.low,
        "high": estimate.high,
    }


# --- jobs why -----------------------------------------------------------------------


def _decision_events(uow: UnitOfWork, uid: str) -> list[RecordedEvent]:
    """The decision events naming job ``uid`` (on any stream), in its timeline's order."""
    rows = timeline_rows(uow, uid)
    positions = [int(r[1]) for r in rows if r[3] in ("AdmissionDecided", "PreemptionDecided")]
    by_position = {e.position: e for e in uow.read_positions(positions)}
    return [by_position[p] for p in positions if p in by_position]


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
        # a service replica admitted on public resources, outside its quota
        "spillover": event.data.get("reason") == SPILLOVER_REASON,
        "state": event.data.get("state", {}),
    }


def _stop(events: list[RecordedEvent]) -> dict[str, Any] | None:
    """The dispatcher's stop of the job at its maximum run time (or of a service or
    notebook by a budget or a released subscription), if it stopped it."""
    stops = [e for e in events if e.type == "AdmissionDecided" and e.data.get("outcome") == "stop"]
    if not stops:
        return None
    event = stops[-1]
    run = event.data.get("state", {}).get("run", {})
    return {
        "decided_at": event.occurred_at,
        "reason": event.data.get("reason"),
        "ran_seconds": run.get("ran_seconds"),
        "max_run_seconds": run.get("max_run_seconds"),
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
        "estimated_start_low": data.get("estimated_start_low"),
        "estimated_start_high": data.get("estimated_start_high"),
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
    times = run_times(conn, view.jobs)
    estimate = start_estimates(view, times, [uid], max_steps=max_steps).get(uid)
    own = times.pending(job)
    figures = blocking_figures(tree.quotas, tree.admitted, job)
    if status is not None:
        reason: str | None = tiered_reason(status, job, tree.quotas)
    elif admitted_now:
        reason = None
    else:
        reason = "PreemptionPending"  # it preempts this cycle: it starts after its victims
    queue_length = sum(1 for s in result.pending if s.quota == job.quota)
    settings = view.cycle.queues.get(job.quota, QueueSettings())
    return {
        "reason": reason,
        "reason_text": (
            _reason_text(reason, view, result, status, settings)
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
        "request": {k: whole(v) for k, v in job.resources.items()},
        "figures": [
            {
                "quota": f.quota,
                "key": f.key,
                "request": whole(f.request),
                "min": whole(f.min),
                "max": None if f.max is None else whole(f.max),
                "used": whole(f.used),
                "available": whole(f.available),
                "capacity": whole(f.capacity),
                "short": f.short,
            }
            for f in figures
        ],
        "estimate": _estimate_json(estimate, now),
        "estimate_method": _method(estimate, own),
        "runtime": runtime_json(own) if own else None,
        "last_decision": _last_pending(events, view.jobs[uid].attempt if uid in view.jobs else 0),
    }


def _reason_text(
    reason: str,
    view: DispatchView,
    result: CycleResult,
    status: PendingStatus | None,
    settings: QueueSettings,
) -> str:
    """The reason for people, with what holds the queue: said of a job never tried behind a
    blocked one, and of a head that can never fit but is retried, never skipped
    (``on_unfit_head: Retry``)."""
    text = REASONS.get(reason, reason)
    if status is None:
        return text
    policy = settings.policy
    if status.reason == "ExceedsMaxQuota":
        behind = sum(1 for s in result.pending if s.held_by == status.job)
        if not behind:
            return text
        return (
            f"{text}; its quota's {policy} queue retries it at its head and never skips it "
            f"(on_unfit_head: Retry), so the {behind} job(s) behind it wait until it is "
            "withdrawn or its quota grows (on_unfit_head: Skip would let them pass)"
        )
    if status.held_by is None:
        return text
    holder = next((s for s in result.pending if s.job == status.held_by), None)
    known = view.jobs.get(status.held_by)
    name = f"{known.name} ({status.held_by})" if known else status.held_by
    if holder is not None and holder.reason == "ExceedsMaxQuota":
        # not "fits once jobs ahead of it finish": no finishing job lets it in
        return (
            f"it is never tried: {name}, ahead of it in its quota's {policy} queue, can "
            "never fit as configured (ExceedsMaxQuota) and is retried at the head, never "
            "skipped (on_unfit_head: Retry), so the queue waits until it is withdrawn or "
            "the quota grows (on_unfit_head: Skip would let the queue pass it)"
        )
    return (
        f"{text}; it is not tried yet: {name}, ahead of it in its quota's {policy} queue, "
        "does not fit now and holds the queue behind it"
    )


def whole(value: float) -> float | int:
    """Quantities are whole units (mGPU, milli-cores, MiB): shown without a ``.0``."""
    return int(value) if float(value).is_integer() else value


def _method(estimate: StartEstimate | None, own: RunTime | None) -> str:
    if estimate is None:
        return "no estimate"
    basis = estimate.basis
    if basis == "now":
        return "it fits now"
    if basis == "never":
        return "none: it does not fit even once everything else has ended"
    if basis == "budget":
        return "none: its workspace's budget is exhausted"
    if basis == "subscription":
        return "none: its quota's subscribed capacity has expired"
    if basis == "unknown":
        return (
            "none: it waits for running jobs whose end cannot be projected "
            "(no job has finished yet)"
        )
    if basis == "horizon":
        return f"none within {estimate.steps} simulated cycles"
    runtime = f"; its own run time: {describe_runtime(own)}" if own else ""
    low, high = RANGE_QUANTILES
    span = (
        f"; range: the {low:.0%}-{high:.0%} percentile start of {RANGE_SAMPLES} simulated "
        "futures, each job's run time drawn from its comparable finished jobs"
        if estimate.low is not None
        else ""
    )
    return (
        f"simulated the dispatcher forward over {estimate.steps} instant(s): "
        f"{estimate.released} running job(s) released at their projected ends (start + the "
        "median run time of comparable finished jobs: same quota and GPU request, else "
        f"wider; never past a declared maximum){span}{runtime}"
    )


def explain_job(
    uow: UnitOfWork,
    uid: str,
    now: datetime,
    *,
    max_steps: int = MAX_STEPS,
    blocked_workspaces: frozenset[str] = frozenset(),
    as_at: bool = False,
    subscriptions: Collection[Subscription] = (),
) -> dict[str, Any]:
    """Why job ``uid`` is where it is at ``now``: pending (reason, positions, figures, start
    estimate), preempted (by whom, which rule, the state then, work lost and its cost),
    running or finished (its admission decision). ``blocked_workspaces``: those whose
    ``stop`` budget is exhausted (as the live loop is given them). ``as_at``: ``now`` is a
    past instant; the job, its queue and its decisions as they stood then."""
    conn: Connection = uow.connection
    # a service's or notebook's replica (its unit ``<uid>#<i>``) is explained with its workload
    workload_uid = unit_workload(uid)
    row = conn.execute(job_state.select().where(job_state.c.job_uid == workload_uid)).first()
    if row is None:
        raise NotFound(f"no job with uid {uid!r}")
    status, status_since = row.status, row.status_since
    view = read_dispatch(
        conn, now, blocked_workspaces=blocked_workspaces, as_at=as_at, subscriptions=subscriptions
    )
    replicas: dict[str, Any] | None = None
    if row.framework in ("service", "notebook"):
        uid, replicas = _replica_of(view, workload_uid, uid)
    events = _decision_events(uow, uid)
    if as_at:
        then = status_at(row.transitions, now)
        if then is None:
            first = row.transitions[0][1] if row.transitions else "later"
            raise Invalid(
                f"job {uid!r} did not exist at {format_timestamp(now)} (first seen {first})"
            )
        status, status_since = then[0], parse_time(then[1])
        events = [e for e in events if e.occurred_at <= now]
    known = view.jobs.get(uid)
    pending = any(p.job == uid for p in view.cycle.pending)
    preemptions = preemptions_of(conn, uid, events, now)
    doc: dict[str, Any] = {
        "job_uid": workload_uid,
        "name": row.name,
        "status": status,
        "status_since": status_since,
        "quota": (known.quota if known else None) or row.quota,
        "workspace": row.workspace,
        "priority": row.priority,
        "billing_mode": row.billing_mode,
        "now": now,
    }
    if replicas is not None:
        # the replica explained (a service is admitted replica by replica) and the others
        doc["replica"] = uid if uid != workload_uid else None
        doc["replicas"] = replicas
    refused = view.refused.get(uid)
    if refused is None and replicas is not None and not replicas["running"] and not pending:
        # carried out: the notebook was scaled to none, its latest decision the refusal
        refused = _refusal(events)
    if refused is not None:
        reason = refused
        doc["answer"] = "refused"
        doc["refusal"] = {"reason": reason, "reason_text": REFUSALS.get(reason, reason)}
        doc["summary"] = (
            f"refused at start: {reason} ({REFUSALS.get(reason, reason)}); a notebook is "
            "admitted or refused when it starts, never queued: start it again to retry"
        )
    elif pending:
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
    doc["stopped"] = _stop(events)
    doc["preemptions"] = preemptions
    # last in every document, whichever answer wrote it (one key order for all answers)
    doc["summary"] = doc.pop("summary", None) or _summary(doc)
    return doc


def _refusal(events: list[RecordedEvent]) -> str | None:
    """The reason of the refusal at start, when it is the latest admission decision."""
    decisions = [e for e in events if e.type == "AdmissionDecided"]
    if decisions and decisions[-1].data.get("outcome") == "refuse":
        return str(decisions[-1].data.get("reason") or "InsufficientQuota")
    return None


def _replica_of(view: DispatchView, workload: str, asked: str) -> tuple[str, dict[str, Any]]:
    """The replica unit to explain for ``asked`` (a unit, kept; or the workload: its first
    waiting replica, else its first refused one, else the workload itself) and the
    workload's replicas: running, waiting (in the cycle's input), refused units, and the
    running (or admitted) ones on public resources (spillover)."""
    units = sorted(
        (u for u in view.jobs.values() if u.workload_uid == workload),
        key=lambda u: int(u.uid.rsplit("#", 1)[1]),
    )
    queued = {p.job for p in view.cycle.pending}
    running = [u.uid for u in units if u.occupying]
    waiting = [u.uid for u in units if u.uid in queued]
    refused = [u.uid for u in units if u.uid in view.refused]
    chosen = asked
    if asked == workload:
        chosen = next(iter(waiting + refused), workload)
    spilled = [u.uid for u in units if u.uid in view.spilled]
    summary = {"running": running, "waiting": waiting, "refused": refused, "spilled": spilled}
    return chosen, summary


def _projected_end(conn: Connection, view: DispatchView, uid: str) -> dict[str, Any]:
    """When an admitted job is expected to end, as the start estimates of others assume."""
    wl = next((a for a in view.cycle.admitted if a.job == uid), None)
    if wl is None:
        return {"projected_end": None, "runtime": None}
    times = run_times(conn, [uid])
    runtime = times.running(wl, view.cycle.now)
    return {
        "projected_end": projected_ends((wl,), times, view.cycle.now).get(uid),
        "runtime": runtime_json(runtime) if runtime is not None else None,
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
        if est and est.get("low") is not None and est["low"] != est.get("high"):
            high = est.get("high")
            start += f" (likely {format_timestamp(est['low'])} to " + (
                f"{format_timestamp(high)})" if high is not None else "later)"
            )
        reason = p["reason"] or "fits now"
        again = " (preempted before, pending again)" if doc["preemptions"] else ""
        return f"pending{again}: {reason}, {where}{start}"
    admission = doc.get("admission")
    admitted = (
        (
            f"admitted at {format_timestamp(admission['decided_at'])} on public resources, "
            f"beyond quota {admission['quota']} (spillover)"
            if admission.get("spillover")
            else f"admitted at {format_timestamp(admission['decided_at'])} in quota "
            f"{admission['quota']}" + (" (borrowing)" if admission["borrowing"] else "")
        )
        if admission
        else "no admission decision stored (started before the dispatcher or outside it)"
    )
    preempted = f"; preempted {len(doc['preemptions'])} time(s)" if doc["preemptions"] else ""
    end = doc.get("projected_end")
    ending = f"; projected end {format_timestamp(end)}" if end else ""
    stop = doc.get("stopped")
    if stop and stop["max_run_seconds"] is None:
        # a service or notebook stopped by a budget or a released subscription
        ending += f"; stopped at {format_timestamp(stop['decided_at'])}: {stop['reason']}"
    elif stop:
        ending += (
            f"; stopped at {format_timestamp(stop['decided_at'])}: {stop['reason']} (ran "
            f"{stop['ran_seconds']} s, maximum {stop['max_run_seconds']} s)"
        )
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
