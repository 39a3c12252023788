"""When will a pending job start? A forward simulation of the dispatcher, pure.

From one cycle's input and each admitted job's projected end, :func:`estimate_starts`
replays the dispatcher forward in time: run the cycle (:func:`~ledger.dispatch.cycle.plan_cycle`,
with the quotas' own queue policies), give every job it admits a projected end of its own
(admission + expected run time), then jump to the next projected end, release the jobs
ending then and run the cycle again, until each job asked about is admitted. Its
estimated start is the simulated instant of that admission.

Assumptions, said once (``jobs why`` prints the basis with each estimate):

- a running job ends at its projected end; one already past it ("overdue") is expected
  to end at any moment, i.e. at ``now``;
- a job with no projected end (none given) never ends in the simulation: a job that
  only fits once it ends gets no estimate (basis ``unknown``);
- victims of a simulated preemption stop at once and are re-queued at that instant
  (Kueue's default requeuing timestamp, ``Eviction``) to run their full expected time again;
  a preemptor whose victims are still stopping (``CycleInput.preempting``) gets its
  victims' capacity at ``now``;
- parked jobs (BestEffortFIFO) are retried after every release (capacity freed);
- nothing new arrives, no quota changes, no budget is raised (``BudgetExhausted`` jobs get
  no estimate).

Only the cycles at ``now`` may preempt; later preemptions are not foreseen, so a cycle
after a release runs with every quota's preemption off and the running jobs summed per
quota (the same capacity arithmetic, at the cost of the quotas rather than the jobs), and
an instant where no waiting job fits is skipped without running a cycle at all.

The work is bounded: at most ``max_steps`` instants are simulated (default
:data:`MAX_STEPS`); a job still pending then gets no estimate, with basis ``horizon``.
:func:`ahead_of` narrows the queue to the jobs that decide a start: those the cycle at
``now`` admits or reserves for, and those ahead of the job in its tree's order (the
issue's "projected end of the jobs ahead"); jobs behind it are left out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from ledger.dispatch.capacity import Tree
from ledger.dispatch.cycle import CycleInput, CycleResult, plan_cycle
from ledger.dispatch.model import Admitted, Decision, Incoming, Preemption, QuotaNode
from ledger.errors import Invalid

__all__ = [
    "MAX_STEPS",
    "Basis",
    "StartEstimate",
    "ahead_of",
    "estimate_starts",
    "ever_fits",
    "within_tree",
]

#: simulated cycles at most, per estimate run
MAX_STEPS = 256

#: ``now``: admitted in the current cycle; ``simulated``: after jobs ahead end;
#: ``never``: cannot fit even once everything else has ended (ExceedsMaxQuota);
#: ``unknown``: it waits for a running job whose end cannot be projected;
#: ``budget``: its workspace's budget is exhausted; ``horizon``: still pending after
#: ``max_steps`` simulated cycles
Basis = Literal["now", "simulated", "never", "unknown", "budget", "subscription", "horizon"]


@dataclass(frozen=True)
class StartEstimate:
    job: str
    #: the estimated start (admission); None when the basis gives none
    start: datetime | None
    basis: Basis
    #: simulated cycles until it was decided
    steps: int
    #: running jobs released (at their projected ends) before it started
    released: int


def ever_fits(quotas: tuple[QuotaNode, ...], job: Incoming) -> bool:
    """Whether ``job`` fits its quota with nothing else admitted: False is Kueue's
    "can never fit as configured" (``ExceedsMaxQuota``). An idle-mode job may borrow past
    its own quota's ``max``: only its ancestors bound it."""
    request = {k: v for k, v in job.resources.items() if v > 0}
    return Tree(quotas, ()).fits(job.quota, request, own_cap=job.billing_mode != "idle")


def _roots(quotas: tuple[QuotaNode, ...]) -> dict[str, str]:
    parent = {q.name: q.parent for q in quotas}
    out: dict[str, str] = {}
    for q in quotas:
        name, seen = q.name, {q.name}
        while parent.get(name) is not None and parent[name] not in seen:
            name = parent[name] or name
            seen.add(name)
        out[q.name] = name
    return out


def ahead_of(cycle: CycleInput, jobs: Collection[str]) -> CycleInput:
    """``cycle`` with only the pending jobs that decide when ``jobs`` start: the ones its
    cycle at ``now`` admits or reserves capacity for, and in each tree holding one of
    ``jobs``, the ones up to the last of them in the tree's order (cohort position)."""
    result = plan_cycle(cycle)
    root = _roots(cycle.quotas)
    wanted = set(jobs)
    cut: dict[str, int] = {}
    for status in result.pending:
        if status.job in wanted:
            r = root[status.quota]
            cut[r] = max(cut.get(r, 0), status.cohort_position)
    keep = {d.job for d in result.admissions} | wanted
    keep |= {s.job for s in result.pending if s.reason == "PreemptionPending"}
    keep |= {s.job for s in result.pending if s.cohort_position <= cut.get(root[s.quota], 0)}
    return replace(cycle, pending=tuple(p for p in cycle.pending if p.job in keep))


def _any_fits(cycle: CycleInput, admitted: list[Admitted], pending: list[Incoming]) -> bool:
    """Whether some waiting job fits without preemption (idle jobs past their own max)."""
    tree = Tree(cycle.quotas, admitted)
    for job in pending:
        if job.workspace and job.workspace in cycle.blocked_workspaces:
            continue
        if job.quota in cycle.expired_quotas:
            continue
        request = {k: v for k, v in job.resources.items() if v > 0}
        if tree.fits(job.quota, request, own_cap=job.billing_mode != "idle"):
            return True
    return False


def _usage_only(admitted: list[Admitted], at: datetime) -> tuple[Admitted, ...]:
    """The running jobs as one usage entry per quota: the same capacity arithmetic for a
    cycle that preempts nothing, at the cost of the quotas, not of the jobs."""
    summed: dict[str, dict[str, float]] = {}
    for wl in admitted:
        usage = summed.setdefault(wl.quota, {})
        for k, v in wl.resources.items():
            usage[k] = usage.get(k, 0) + v
    return tuple(Admitted(f"usage of {q}", q, 0, r, at) for q, r in summed.items())


def within_tree(cycle: CycleInput, quota: str) -> CycleInput:
    """``cycle`` narrowed to the tree (cohort) holding ``quota``: nothing outside it shares
    capacity with it, so an estimate needs no more (and costs far less)."""
    root = _roots(cycle.quotas)
    inside = {name for name, r in root.items() if r == root[quota]}
    return replace(
        cycle,
        quotas=tuple(q for q in cycle.quotas if q.name in inside),
        admitted=tuple(wl for wl in cycle.admitted if wl.quota in inside),
        pending=tuple(p for p in cycle.pending if p.quota in inside),
    )


def estimate_starts(
    cycle: CycleInput,
    ends: Mapping[str, datetime],
    durations: Mapping[str, timedelta],
    *,
    jobs: Collection[str] | None = None,
    max_steps: int = MAX_STEPS,
) -> dict[str, StartEstimate]:
    """The estimated start of each pending job in ``jobs`` (default: all of
    ``cycle.pending``), keyed by job.

    ``ends``: the projected end of each admitted job; ``durations``: the expected run time
    of each pending job once admitted (a job missing from either runs forever).
    """
    if max_steps < 1:
        raise Invalid("max_steps must be at least 1")
    pending_ids = {p.job for p in cycle.pending}
    wanted = set(pending_ids if jobs is None else jobs) & pending_ids
    out: dict[str, StartEstimate] = {}
    for job in cycle.pending:
        if job.job in wanted and not ever_fits(cycle.quotas, job):
            out[job.job] = StartEstimate(job.job, None, "never", 0, 0)
    now = cycle.now
    admitted = list(cycle.admitted)
    end_of: dict[str, datetime | None] = {
        wl.job: (max(ends[wl.job], now) if wl.job in ends else None) for wl in admitted
    }
    run_for = dict(durations)
    # a job that can never fit is left out: it would only be retried every step
    pending = [p for p in cycle.pending if p.job not in out]
    parked, preempting = cycle.parked, cycle.preempting
    t, steps, released, exhausted, endless = now, 0, 0, True, False
    moved = False  # time moved on to a release since the last cycle
    calm = tuple(replace(q, preemption=Preemption()) for q in cycle.quotas)
    while wanted - out.keys() and steps < max_steps:
        if moved and not _any_fits(cycle, admitted, pending):
            result = CycleResult(parked=parked)  # nothing can start now: next release
        elif moved:
            # later preemptions are not foreseen: the running jobs count only as usage
            result = plan_cycle(
                replace(
                    cycle,
                    quotas=calm,
                    admitted=_usage_only(admitted, t),
                    pending=tuple(pending),
                    now=t,
                    parked=parked,
                    preempting=preempting,
                )
            )
        else:
            result = plan_cycle(
                replace(
                    cycle,
                    admitted=tuple(admitted),
                    pending=tuple(pending),
                    now=t,
                    parked=parked,
                    preempting=preempting,
                )
            )
        steps += 1
        moved = False
        if result.preemptions:
            # victims stop at once and re-queue; this step's admissions are not kept (they
            # may have counted the victims' capacity, which is the preemptors'): the same
            # instant is decided again
            evicted = _preempt(result.preemptions, admitted, end_of, run_for)
            gone = {v.job for v in evicted}
            admitted = [wl for wl in admitted if wl.job not in gone]
            pending += [
                Incoming(v.job, v.quota, v.priority, v.resources, t, v.workspace, v.billing_mode)
                for v in evicted
            ]
            preempting = frozenset()
            continue
        started = {d.job for d in result.admissions}
        for job in pending:
            if job.job not in started:
                continue
            admitted.append(_admitted(job, t))
            end_of[job.job] = t + run_for[job.job] if job.job in run_for else None
            if job.job in wanted:
                basis: Basis = "now" if t == now and steps == 1 else "simulated"
                out[job.job] = StartEstimate(job.job, t, basis, steps, released)
        pending = [p for p in pending if p.job not in started]
        for status in result.pending:
            if status.job in wanted and status.job not in out:
                if status.reason == "BudgetExhausted":
                    out[status.job] = StartEstimate(status.job, None, "budget", steps, released)
                elif status.reason == "SubscriptionExpired":
                    out[status.job] = StartEstimate(
                        status.job, None, "subscription", steps, released
                    )
                elif status.reason == "ExceedsMaxQuota":
                    out[status.job] = StartEstimate(status.job, None, "never", steps, released)
        parked = result.parked
        if preempting:
            # the victims being stopped are gone at once: decide again at the same instant
            preempting = frozenset()
            continue
        future = [e for e in end_of.values() if e is not None]
        if not future:
            exhausted = False
            endless = any(e is None for e in end_of.values())
            break
        t = max(t, min(future))
        ending = {uid for uid, e in end_of.items() if e is not None and e <= t}
        admitted = [wl for wl in admitted if wl.job not in ending]
        for uid in ending:
            del end_of[uid]
        released += len(ending)
        parked = frozenset()  # capacity freed: parked jobs are retried
        moved = True
    basis_left: Basis = "horizon" if exhausted else "unknown" if endless else "never"
    for job_id in sorted(wanted - out.keys()):
        out[job_id] = StartEstimate(job_id, None, basis_left, steps, released)
    return out


def _admitted(job: Incoming, at: datetime) -> Admitted:
    return Admitted(
        job.job, job.quota, job.priority, job.resources, at, job.workspace, job.billing_mode
    )


def _preempt(
    preemptions: tuple[Decision, ...],
    admitted: list[Admitted],
    end_of: dict[str, datetime | None],
    run_for: dict[str, timedelta],
) -> list[Admitted]:
    """The admitted jobs evicted by ``preemptions``; each is re-queued to run its whole
    expected time again (its previous run's length when none was given)."""
    victims: set[str] = set()
    for decision in preemptions:
        victims.update(v.job for v in decision.victims)
    evicted = [wl for wl in admitted if wl.job in victims]
    for wl in evicted:
        end = end_of.pop(wl.job, None)
        if wl.job not in run_for and end is not None:
            run_for[wl.job] = end - wl.admitted_at
    return evicted
