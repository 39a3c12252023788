"""Hypothesis properties of the start estimator: where the world keeps to its assumptions
(every job runs exactly its expected time, nothing new arrives, nobody preempts), the
estimate is exactly the start; and the narrowing that makes it cheap (:func:`ahead_of`,
per-quota usage after the first cycle, skipped instants) changes no answer where it is
exact: one StrictFIFO queue.

The reference world is written independently of :mod:`ledger.dispatch.estimates`: the
dispatcher's own cycle, run at every instant a job ends, over every job one by one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dispatch import Admitted, CycleInput, Incoming, QuotaNode, plan_cycle
from ledger.dispatch.estimates import ahead_of, estimate_starts
from ledger.dispatch.queues import QueuePolicyName, QueueSettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _world(
    cycle: CycleInput, ends: dict[str, datetime], runs: dict[str, timedelta]
) -> dict[str, datetime]:
    """When each pending job starts if every job runs exactly as expected."""
    admitted = list(cycle.admitted)
    end_of = {wl.job: max(ends[wl.job], cycle.now) for wl in admitted}
    pending = list(cycle.pending)
    started: dict[str, datetime] = {}
    t = cycle.now
    while pending:
        result = plan_cycle(
            CycleInput(cycle.quotas, tuple(admitted), tuple(pending), t, cycle.queues)
        )
        for d in result.admissions:
            job = next(p for p in pending if p.job == d.job)
            started[job.job] = t
            admitted.append(Admitted(job.job, job.quota, job.priority, job.resources, t))
            end_of[job.job] = t + runs[job.job]
        pending = [p for p in pending if p.job not in started]
        running = [end_of[wl.job] for wl in admitted]
        if not pending or not running:
            break
        t = min(running)  # overdue jobs (ended "now") leave after the first cycle
        admitted = [wl for wl in admitted if end_of[wl.job] > t]
    return started


POLICIES: tuple[QueuePolicyName, ...] = (
    "StrictFIFO", "FIFO", "BestEffortFIFO", "RoundRobin", "Priority", "Intelligent",
)  # fmt: skip


@st.composite
def queues(
    draw: st.DrawFn, *, leaves: int = 3, policies: tuple[QueuePolicyName, ...] = POLICIES
) -> tuple[CycleInput, dict[str, datetime], dict[str, timedelta]]:
    names = [f"q{i}" for i in range(draw(st.integers(1, leaves)))]
    mins = {q: draw(st.integers(2, 8)) for q in names}
    quotas = (QuotaNode("root"), *(QuotaNode(q, "root", {"gpu": mins[q]}) for q in names))
    capacity = sum(mins.values())
    admitted: list[Admitted] = []
    used = 0
    for i in range(draw(st.integers(0, 6))):
        size = draw(st.integers(1, 4))
        if used + size > capacity:
            break
        used += size
        quota = draw(st.sampled_from(names))
        admitted.append(Admitted(f"r{i}", quota, 0, {"gpu": size}, T0 - timedelta(minutes=30)))
    ends = {wl.job: T0 + timedelta(minutes=draw(st.integers(-5, 60))) for wl in admitted}
    pending = tuple(
        Incoming(
            f"p{i}",
            draw(st.sampled_from(names)),
            draw(st.integers(1, 9)),
            {"gpu": draw(st.integers(1, capacity))},
            T0 - timedelta(minutes=draw(st.integers(0, 20))),
        )
        for i in range(draw(st.integers(1, 8)))
    )
    runs = {p.job: timedelta(minutes=draw(st.integers(1, 40))) for p in pending}
    settings = {q: QueueSettings(draw(st.sampled_from(policies))) for q in names}
    return CycleInput(quotas, tuple(admitted), pending, T0, settings), ends, runs


Case = tuple[CycleInput, dict[str, datetime], dict[str, timedelta]]


@settings(max_examples=200, deadline=None)
@given(queues())
def test_an_estimate_is_the_start_when_the_world_keeps_to_its_assumptions(case: Case) -> None:
    cycle, ends, runs = case
    truth = _world(cycle, ends, runs)
    everyone = estimate_starts(cycle, ends, runs)
    for job in cycle.pending:
        got = everyone[job.job]
        assert got.start == truth.get(job.job), (job.job, got, truth)
        assert got.start is None or got.start >= cycle.now


@settings(max_examples=150, deadline=None)
@given(queues(leaves=1, policies=("StrictFIFO", "FIFO")))
def test_only_the_jobs_ahead_decide_a_start_in_one_holding_queue(case: Case) -> None:
    cycle, ends, runs = case
    everyone = estimate_starts(cycle, ends, runs)
    for job in cycle.pending:
        alone = estimate_starts(ahead_of(cycle, [job.job]), ends, runs, jobs=[job.job])
        assert alone[job.job].start == everyone[job.job].start
