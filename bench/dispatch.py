"""Dispatcher cycle throughput: pending jobs decided per second by one full
:func:`~ledger.dispatch.cycle.plan_cycle`, at 10,000 and at 100,000 admitted workloads.

The world (seeded, so every run decides the same jobs): 1,000 quotas in a 3-level tree (a
root, 20 departments without a min of their own, 979 leaf quotas), GPUs and CPUs; the
admitted workloads fill the leaves to about their min (some borrow, some lend), and 1,000
pending jobs of priorities 1-9 spread over the leaves, under every queue policy and with
within-quota and reclaim preemption enabled on half of the leaves. At 100,000 admitted the
same tree has ten times the quota and ten workloads for each one at 10,000.

Two worlds: within-quota and reclaim preemption (``LowerPriority``) on every second leaf,
and none (Kueue's default policies). Baseline, measured in the same run: the naive cycle,
which decides each pending job with :func:`~ledger.dispatch.preemption.decide` on a fresh
snapshot of everything admitted (what ``plan_cycle`` did before it kept one decider for
the cycle), timed on the first ``--baseline-jobs`` jobs of the same queue, per decision.

Last stdout line: JSON with, per world, decisions/s at 10k and 100k admitted, their
ratio, the time to count the admitted set, and the baseline's rates.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime, timedelta

from ledger.dispatch import (
    Admitted,
    CycleInput,
    Decider,
    Incoming,
    Preemption,
    QueueSettings,
    QuotaNode,
    Snapshot,
    decide,
    plan_cycle,
)
from ledger.dispatch.queues import QueuePolicyName

__all__ = ["main", "world"]

NOW = datetime(2026, 12, 5, tzinfo=UTC)
DEPARTMENTS = 20
FREE_GPUS = 1_000
QUOTAS = 1_000
POLICIES: tuple[QueuePolicyName, ...] = (
    "FIFO",
    "RoundRobin",
    "Balance",
    "Intelligent",
    "StrictFIFO",
    "BestEffortFIFO",
    "Priority",
)


def world(admitted: int, pending: int, *, preempting: int = 2, seed: int = 27) -> CycleInput:
    """The benchmark's cycle input with ``admitted`` running and ``pending`` queued jobs;
    one leaf in ``preempting`` has within-quota and reclaim preemption (0: none)."""
    rng = random.Random(seed)
    leaves = QUOTAS - 1 - DEPARTMENTS
    # the leaves' mins add up to what the running jobs use (2 GPUs, 16 cores on average)
    # plus FREE_GPUS: the same room for the queue at every size of the admitted set
    gpu_min = int((admitted * 2_000 + FREE_GPUS * 1_000) / leaves)
    cpu_min = gpu_min * 8
    quotas: list[QuotaNode] = [QuotaNode("root")]
    leaf_names: list[str] = []
    for d in range(DEPARTMENTS):
        quotas.append(QuotaNode(f"dept-{d:02d}", "root"))
    for n in range(leaves):
        name = f"team-{n:04d}"
        allows = preempting > 0 and n % preempting == 0
        quotas.append(
            QuotaNode(
                name,
                f"dept-{n % DEPARTMENTS:02d}",
                {"gpu": gpu_min, "cpu": cpu_min},
                {"gpu": gpu_min * 2, "cpu": cpu_min * 2},
                preemption=Preemption(
                    within_quota="LowerPriority" if allows else "Never",
                    reclaim="LowerPriority" if allows else "Never",
                ),
            )
        )
        leaf_names.append(name)
    running: list[Admitted] = []
    for n in range(admitted):
        # a skewed spread: some teams borrow, some lend
        leaf = leaf_names[min(leaves - 1, int(rng.betavariate(1.2, 1.0) * leaves))]
        gpus = rng.choice((1, 1, 2, 2, 4))
        running.append(
            Admitted(
                f"run-{n}",
                leaf,
                rng.randint(1, 9),
                {"gpu": gpus * 1000, "cpu": gpus * 8000},
                NOW - timedelta(minutes=rng.randint(1, 600)),
            )
        )
    queued = tuple(
        Incoming(
            f"job-{n}",
            rng.choice(leaf_names),
            rng.randint(1, 9),
            {"gpu": (g := rng.choice((1, 2, 4, 8))) * 1000, "cpu": g * 8000},
            NOW - timedelta(minutes=rng.randint(0, 120)),
        )
        for n in range(pending)
    )
    queues = {leaf: QueueSettings(POLICIES[n % len(POLICIES)]) for n, leaf in enumerate(leaf_names)}
    return CycleInput(tuple(quotas), tuple(running), queued, NOW, queues=queues)


def timed_cycle(cycle: CycleInput) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    result = plan_cycle(cycle)
    seconds = time.perf_counter() - started
    reasons: dict[str, int] = {}
    for p in result.pending:
        reasons[p.reason] = reasons.get(p.reason, 0) + 1
    counts = {
        "admitted": len(result.admissions),
        "preempting": len(result.preemptions),
        **reasons,
    }
    return seconds, counts


def state_build(cycle: CycleInput) -> float:
    """Seconds to count the admitted set into a decider (the O(admitted) part of a cycle,
    which a long-running dispatcher could keep between cycles)."""
    started = time.perf_counter()
    Decider(Snapshot(cycle.quotas, cycle.admitted, fair_sharing=cycle.fair_sharing))
    return time.perf_counter() - started


def baseline(cycle: CycleInput, jobs: int) -> float:
    """Seconds per decision of the naive cycle: a fresh snapshot per pending job."""
    admitted = list(cycle.admitted)
    order = sorted(cycle.pending, key=lambda j: (j.created_at, -j.priority, j.job))[:jobs]
    started = time.perf_counter()
    for job in order:
        decision = decide(Snapshot(cycle.quotas, tuple(admitted)), job)
        if decision.outcome == "admit":
            admitted.append(Admitted(job.job, job.quota, job.priority, job.resources, cycle.now))
    return (time.perf_counter() - started) / max(1, len(order))


WORLDS = (
    ("preemption", 2, "within-quota and reclaim preemption on every 2nd leaf"),
    ("nopreemption", 0, "no preemption (Kueue's default policies)"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench dispatch")
    parser.add_argument("--pending", type=int, default=1_000)
    parser.add_argument("--baseline-jobs", type=int, default=10)
    args = parser.parse_args(argv)
    figures: dict[str, float] = {}
    for name, preempting, what in WORLDS:
        print(f"{QUOTAS:,} quotas in 3 levels, {what}:")
        for label, admitted in (("10k", 10_000), ("100k", 100_000)):
            cycle = world(admitted, args.pending, preempting=preempting)
            seconds, counts = timed_cycle(cycle)
            build = state_build(cycle)
            rate = args.pending / seconds
            per_baseline = baseline(cycle, args.baseline_jobs)
            figures[f"{name}_decisions_per_s_{label}"] = round(rate)
            figures[f"{name}_state_build_ms_{label}"] = round(build * 1000, 1)
            figures[f"{name}_baseline_decisions_per_s_{label}"] = round(1 / per_baseline, 1)
            print(
                f"  {admitted:,} admitted, {args.pending:,} pending: one cycle"
                f" {seconds * 1000:,.0f} ms = {rate:,.0f} decisions/s"
                f" (of which counting the admitted set {build * 1000:,.0f} ms); {counts};"
                f" baseline (a fresh snapshot per decision) {1 / per_baseline:,.1f} decisions/s"
            )
        figures[f"{name}_ratio_100k_to_10k"] = round(
            figures[f"{name}_decisions_per_s_100k"] / figures[f"{name}_decisions_per_s_10k"], 3
        )
    print(json.dumps({"quotas": QUOTAS, "pending": args.pending, **figures}))
    return 0
