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

A start is uncertain because run times are: :func:`estimate_ranges` states it as a range.
It runs the same simulation ``samples`` times, each with every job's run time drawn from
its own distribution (:class:`~ledger.dispatch.runtimes.RunTime`: comparable finished
jobs, conditional on a running job's age, bounded by a declared maximum; in one future
every job's draw comes from the same stratum of its distribution: run times of jobs
running at once go together, they are not independent), and takes the
``quantiles`` (default :data:`RANGE_QUANTILES`) of the starts it found: the stated range
is where the start falls in that share of the simulated futures. The draws are seeded, so
the same input gives the same range.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from ledger.dispatch.capacity import Tree
from ledger.dispatch.cycle import CycleInput, CycleResult, placed, plan_cycle
from ledger.dispatch.model import Admitted, Decision, Incoming, Preemption, QuotaNode
from ledger.dispatch.runtimes import RunTime
from ledger.errors import Invalid

__all__ = [
    "MAX_STEPS",
    "RANGE_GRAIN",
    "RANGE_QUANTILES",
    "RANGE_SAMPLES",
    "Basis",
    "StartEstimate",
    "StartRange",
    "ahead_of",
    "estimate_ranges",
    "estimate_starts",
    "ever_fits",
    "within_tree",
]

#: simulated cycles at most, per estimate run
MAX_STEPS = 256
#: the stated range: these percentiles of the simulated starts
RANGE_QUANTILES = (0.1, 0.9)
#: simulated futures a range is taken from
RANGE_SAMPLES = 16
#: a range's futures release together the jobs ending within this share of the time
#: simulated so far (their drawn ends all differ: one instant each would cost a cycle each)
RANGE_GRAIN = 0.1
_BELOW_ONE = math.nextafter(1.0, 0.0)

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
    #: the start range (:func:`estimate_ranges`), when one was estimated; ``high`` None
    #: with a ``low``: no upper bound (too many simulated futures never started it)
    low: datetime | None = None
    high: datetime | None = None


@dataclass(frozen=True)
class StartRange:
    """Where a job's start falls in the simulated futures (:func:`estimate_ranges`)."""

    job: str
    #: the lower and upper percentile start; None: beyond every simulated future
    low: datetime | None
    high: datetime | None
    #: futures simulated, and in how many of them it started
    samples: int
    started: int


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
    root = _roots(placed(cycle).quotas)
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
    grain: float = 0.0,
) -> dict[str, StartEstimate]:
    """The estimated start of each pending job in ``jobs`` (default: all of
    ``cycle.pending``), keyed by job.

    ``grain``: jobs ending within this share of the time simulated so far after the next
    end are released with it, at the last of their ends (0: each end is an instant of its
    own; a range's futures, whose drawn ends all differ, take :data:`RANGE_GRAIN`).

    ``ends``: the projected end of each admitted job; ``durations``: the expected run time
    of each pending job once admitted (a job missing from either runs forever).
    """
    if max_steps < 1:
        raise Invalid("max_steps must be at least 1")
    cycle = placed(cycle)  # an inner quota's workloads on its own leaf, as the cycle puts them
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
    # a job that can never fit stays: the cycle sets it aside or, at the head of a holding
    # queue (on_unfit_head: Retry), lets it hold the jobs behind it
    pending = list(cycle.pending)
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
                Incoming(
                    v.job,
                    v.quota,
                    v.priority,
                    v.resources,
                    t,
                    v.workspace,
                    v.billing_mode,
                    v.workload,
                )
                for v in evicted
            ]
            preempting = frozenset()
            continue
        started = {d.job for d in result.admissions}
        for job in pending:
            if job.job not in started:
                continue
            admitted.append(job.admitted(t))
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
        if grain:
            horizon = t + (t - now) * grain
            t = max(e for e in future if e <= horizon)
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


def estimate_ranges(
    cycle: CycleInput,
    running: Mapping[str, RunTime],
    pending: Mapping[str, RunTime],
    *,
    jobs: Collection[str] | None = None,
    quantiles: tuple[float, float] = RANGE_QUANTILES,
    samples: int = RANGE_SAMPLES,
    seed: int = 0,
    max_steps: int = MAX_STEPS,
) -> dict[str, StartRange]:
    """The start range of each pending job in ``jobs`` (default: all of ``cycle.pending``):
    :func:`estimate_starts` over ``samples`` futures, each admitted job ending at its start
    plus a run time drawn from ``running[job]`` and each pending job running a time drawn
    from ``pending[job]`` (a job missing from either runs forever), then the ``quantiles``
    of the starts found, a future where the job never started counting as later than all.
    """
    q_low, q_high = quantiles
    if not 0 <= q_low <= q_high < 1:
        raise Invalid(f"range quantiles must satisfy 0 <= low <= high < 1: {quantiles}")
    if samples < 1:
        raise Invalid("a range needs at least one simulated future")
    rng = random.Random(seed)
    pending_ids = {p.job for p in cycle.pending}
    wanted = sorted(set(pending_ids if jobs is None else jobs) & pending_ids)
    found: dict[str, list[float]] = {job: [] for job in wanted}
    # each future draws every job's run time from the same stratum of its distribution
    # (the futures cover the strata evenly, so few already span each run time's range):
    # the jobs running at once are not independent (clones of one workload run alike; a
    # book short of long runs errs for all of them alike), and independent draws make
    # "one of N ends within minutes" near certain, a range far earlier than the median
    # future (the point estimate, this ordering's middle) and than the starts seen
    strata = rng.sample(range(samples), samples)

    def draw(i: int, runtime: RunTime) -> timedelta:
        u = min((strata[i] + rng.random()) / samples, _BELOW_ONE)
        return timedelta(seconds=runtime.draw(u))

    for i in range(samples):
        ends = {
            wl.job: wl.admitted_at + draw(i, running[wl.job])
            for wl in cycle.admitted
            if wl.job in running
        }
        runs = {p.job: draw(i, pending[p.job]) for p in cycle.pending if p.job in pending}
        got = estimate_starts(
            cycle, ends, runs, jobs=wanted, max_steps=max_steps, grain=RANGE_GRAIN
        )
        for job in wanted:
            start = got[job].start
            found[job].append(math.inf if start is None else (start - cycle.now).total_seconds())
    out: dict[str, StartRange] = {}
    for job, offsets in found.items():
        offsets.sort()
        low, high = _quantile(offsets, q_low), _quantile(offsets, q_high)
        out[job] = StartRange(
            job,
            None if math.isinf(low) else cycle.now + timedelta(seconds=low),
            None if math.isinf(high) else cycle.now + timedelta(seconds=high),
            samples,
            sum(1 for x in offsets if not math.isinf(x)),
        )
    return out


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks; infinite when a neighbour is."""
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    if math.isinf(ordered[high]) and rank > low:
        return math.inf
    if math.isinf(ordered[low]):
        return math.inf
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
