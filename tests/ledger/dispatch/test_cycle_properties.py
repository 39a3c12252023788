"""Hypothesis properties of a whole cycle over random three-level trees (root, inner
quotas, leaves), random queue policies and preemption policies.

The capacity check is written independently of :mod:`ledger.dispatch.capacity`: without
lending limits an inner node's quota is its ``min`` (at least its children's), so a tree
holds when every node's subtree usage is within its ``max`` and the root's within its
``min``. The queue order is recomputed here too (priority, then queue time, then name)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dispatch import (
    Admitted,
    CycleInput,
    Incoming,
    Preemption,
    QueueSettings,
    QuotaNode,
    Snapshot,
    decide,
    plan_cycle,
)
from ledger.dispatch.cycle import _Cycle

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
KEYS = ("gpu", "cpu")
POLICIES = (
    "FIFO",
    "RoundRobin",
    "Balance",
    "Intelligent",
    "StrictFIFO",
    "BestEffortFIFO",
    "Priority",
)
HOLDING = ("FIFO", "StrictFIFO")


def holds(quotas: tuple[QuotaNode, ...], usage: dict[str, dict[str, float]]) -> bool:
    """Every node's subtree usage within its max; the root's within its min."""
    parent = {q.name: q.parent for q in quotas}
    subtree: dict[str, dict[str, float]] = {q.name: {} for q in quotas}
    for leaf, used in usage.items():
        node: str | None = leaf
        while node is not None:
            for k, v in used.items():
                subtree[node][k] = subtree[node].get(k, 0) + v
            node = parent[node]
    for q in quotas:
        for k, v in subtree[q.name].items():
            if k in q.max and v > q.max[k] + 1e-9:
                return False
            if q.parent is None and v > (q.min or {}).get(k, 0) + 1e-9:
                return False
    return True


def usage_of(jobs: list[Admitted]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for wl in jobs:
        for k, v in wl.resources.items():
            out.setdefault(wl.quota, {})[k] = out.setdefault(wl.quota, {}).get(k, 0) + v
    return out


@st.composite
def worlds(draw: st.DrawFn) -> CycleInput:
    quotas: list[QuotaNode] = []
    leaves: list[str] = []
    inner_nodes: list[QuotaNode] = []
    for i in range(draw(st.integers(1, 3))):
        kids: list[QuotaNode] = []
        for j in range(draw(st.integers(1, 3))):
            name = f"l{i}{j}"
            mins = {k: float(draw(st.integers(0, 6))) for k in KEYS}
            cap = draw(st.none() | st.integers(0, 8))
            preemption = Preemption(
                within_quota=draw(
                    st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
                ),
                reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            )
            maxes = {} if cap is None else {k: mins[k] + cap for k in KEYS}
            kids.append(QuotaNode(name, f"n{i}", mins, maxes, preemption=preemption))
            leaves.append(name)
        pool = draw(st.integers(0, 4))
        inner_min = {k: sum((c.min or {})[k] for c in kids) + pool for k in KEYS}
        inner_cap = draw(st.none() | st.integers(0, 8))
        inner_max = {} if inner_cap is None else {k: inner_min[k] + inner_cap for k in KEYS}
        explicit = draw(st.booleans())
        inner_nodes.append(QuotaNode(f"n{i}", "root", inner_min if explicit else None, inner_max))
        quotas.extend(kids)
    root_pool = draw(st.integers(0, 4))
    root_min = {
        k: sum((node.min or {}).get(k, 0) for node in inner_nodes) + root_pool for k in KEYS
    }
    # an inner node without min guarantees its children's
    for inner in inner_nodes:
        if inner.min is None:
            kids_min = {
                k: sum((q.min or {})[k] for q in quotas if q.parent == inner.name) for k in KEYS
            }
            root_min = {k: root_min[k] + kids_min[k] for k in KEYS}
    tree = (QuotaNode("root", None, root_min), *inner_nodes, *quotas)

    def request() -> dict[str, float]:
        return {k: float(draw(st.integers(0, 4))) for k in KEYS}

    admitted: list[Admitted] = []
    for n in range(draw(st.integers(0, 12))):
        wl = Admitted(
            f"run{n}",
            draw(st.sampled_from(leaves)),
            draw(st.integers(0, 9)),
            request(),
            T0 + timedelta(minutes=draw(st.integers(0, 59))),
            billing_mode=draw(st.sampled_from(["public"] * 9 + ["idle"])),
        )
        if holds(tree, usage_of([*admitted, wl])):
            admitted.append(wl)
    pending = tuple(
        Incoming(
            f"p{n}",
            draw(st.sampled_from(leaves)),
            draw(st.integers(1, 9)),
            request(),
            T0 + timedelta(minutes=draw(st.integers(-600, 59))),
        )
        for n in range(draw(st.integers(1, 14)))
    )
    queues = {
        leaf: QueueSettings(
            draw(st.sampled_from(POLICIES)),
            balance_timeout=timedelta(minutes=draw(st.integers(1, 60))),
            aging_interval=timedelta(minutes=draw(st.integers(1, 60))),
            on_unfit_head=draw(st.sampled_from(["Retry", "Skip"])),
        )
        for leaf in leaves
    }
    fair = draw(st.booleans())
    return CycleInput(tree, tuple(admitted), pending, NOW, queues=queues, fair_sharing=fair)


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_a_cycle_keeps_every_max_and_the_trees_capacity(world: CycleInput) -> None:
    assert holds(world.quotas, usage_of(list(world.admitted)))
    result = plan_cycle(world)
    pending = {p.job: p for p in world.pending}
    admitted = list(world.admitted)
    for d in result.admissions:
        p = pending[d.job]
        admitted.append(Admitted(p.job, p.quota, p.priority, p.resources, NOW))
        # after each admission, in order: the tree still holds
        assert holds(world.quotas, usage_of(admitted)), d.job


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_each_job_is_decided_once_and_no_victim_is_shared_or_admitted(world: CycleInput) -> None:
    result = plan_cycle(world)
    admitted = [d.job for d in result.admissions]
    statuses = [p.job for p in result.pending]
    assert sorted(admitted + statuses) == sorted(p.job for p in world.pending)
    victims = [v.job for d in result.preemptions for v in d.victims]
    assert len(victims) == len(set(victims))  # no two preemptors share a victim
    running = {wl.job for wl in world.admitted}
    assert set(victims) <= running and not set(victims) & set(admitted)
    preemptors = {d.job for d in result.preemptions}
    assert not preemptors & set(admitted)  # not admitted in the cycle that preempts
    reasons = {p.job: p.reason for p in result.pending}
    assert all(reasons[j] == "PreemptionPending" for j in preemptors)
    # positions: 1..n in each quota, 1..N in each tree
    per_quota = Counter(p.quota for p in result.pending)
    for quota, n in per_quota.items():
        assert sorted(p.position for p in result.pending if p.quota == quota) == list(
            range(1, n + 1)
        )
    assert sorted(p.cohort_position for p in result.pending) == list(
        range(1, len(result.pending) + 1)
    )
    # a job held behind another waits behind a job of its own queue that is still waiting
    by_job = {p.job: p for p in result.pending}
    for p in result.pending:
        if p.held_by is not None:
            holder = by_job[p.held_by]
            assert holder.quota == p.quota and holder.position < p.position, p


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_fifo_queues_never_admit_behind_a_blocked_head(world: CycleInput) -> None:
    result = plan_cycle(world)
    admitted = {d.job for d in result.admissions}
    reasons = {p.job: p.reason for p in result.pending}
    for quota, queue in world.queues.items():
        if queue.policy not in HOLDING:
            continue
        order = sorted(
            (p for p in world.pending if p.quota == quota),
            key=lambda p: (-p.priority, p.created_at, p.job),
        )
        # a job that can never fit holds the queue too unless its quota skips it
        holding = ("WaitingForQuota", "PreemptionPending") + (
            ("ExceedsMaxQuota",) if queue.on_unfit_head == "Retry" else ()
        )
        blocked = False
        for p in order:
            if blocked:
                assert p.job not in admitted, (quota, p.job)
            if reasons.get(p.job) in holding:
                blocked = True


@settings(max_examples=300, deadline=None)
@given(worlds(), st.booleans())
def test_the_victim_search_is_skipped_only_when_it_would_find_none(
    world: CycleInput, fair: bool
) -> None:
    state = _Cycle(world)
    for job in world.pending:
        request = {k: v for k, v in job.resources.items() if v > 0}
        if state.tree.fits(job.quota, request) or state.may_find_victims(job):
            continue
        decision = decide(Snapshot(world.quotas, world.admitted, fair_sharing=fair), job)
        assert decision.outcome == "pending", job


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_intelligent_queues_never_admit_behind_a_blocked_high_priority_job(
    world: CycleInput,
) -> None:
    result = plan_cycle(world)
    admitted = {d.job for d in result.admissions}
    reasons = {p.job: p.reason for p in result.pending}
    for quota, queue in world.queues.items():
        if queue.policy != "Intelligent":
            continue
        jobs = [p for p in world.pending if p.quota == quota]
        high = sorted(
            (p for p in jobs if p.priority >= 7), key=lambda p: (-p.priority, p.created_at, p.job)
        )
        holding = ("WaitingForQuota", "PreemptionPending") + (
            ("ExceedsMaxQuota",) if queue.on_unfit_head == "Retry" else ()
        )
        for n, p in enumerate(high):
            if reasons.get(p.job) in holding:
                behind = high[n + 1 :] + [j for j in jobs if j.priority < 7]
                assert not {j.job for j in behind} & admitted, (quota, p.job)
                break
