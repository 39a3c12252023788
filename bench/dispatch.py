"""Dispatcher cycle throughput: pending jobs decided per second by one full
:func:`~ledger.dispatch.cycle.plan_cycle`, at 10,000 and at 100,000 admitted workloads.

The world (seeded, so every run decides the same jobs): 1,000 quotas in a 3-level tree (a
root, 20 departments without a min of their own, 979 leaf quotas), GPUs and CPUs; the
admitted workloads fill the leaves to about their min (some borrow, some lend), and 1,000
pending jobs of priorities 1-9 spread over the leaves, under every queue policy and with
within-quota and reclaim preemption enabled on half of the leaves. At 100,000 admitted the
same tree has ten times the quota and ten workloads for each one at 10,000.

Baseline, measured in the same run: the naive cycle, which decides each pending job with
:func:`~ledger.dispatch.preemption.decide` on a fresh snapshot of everything admitted (what
``plan_cycle`` did before it kept one capacity tree for the cycle), timed on the first
``--baseline-jobs`` jobs of the same queue and reported per decision.

Last stdout line: JSON with ``decisions_per_s_10k``, ``decisions_per_s_100k``, their
ratio and the baseline's rates.
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


def world(admitted: int, pending: int, seed: int = 27) -> CycleInput:
    """The benchmark's cycle input with ``admitted`` running and ``pending`` queued jobs."""
    rng = random.Random(seed)
    leaves = QUOTAS - 1 - DEPARTMENTS
    per_leaf = admitted / leaves
    # a leaf's min holds its share of the running jobs (1-4 GPUs, 8-32 cores each)
    gpu_min = int(per_leaf * 2_500)
    cpu_min = int(per_leaf * 20_000)
    quotas: list[QuotaNode] = [QuotaNode("root")]
    leaf_names: list[str] = []
    for d in range(DEPARTMENTS):
        quotas.append(QuotaNode(f"dept-{d:02d}", "root"))
    for n in range(leaves):
        name = f"team-{n:04d}"
        preempting = n % 2 == 0
        quotas.append(
            QuotaNode(
                name,
                f"dept-{n % DEPARTMENTS:02d}",
                {"gpu": gpu_min, "cpu": cpu_min},
                {"gpu": gpu_min * 2, "cpu": cpu_min * 2},
                preemption=Preemption(
                    within_quota="LowerPriority" if preempting else "Never",
                    reclaim="LowerPriority" if preempting else "Never",
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


def baseline(cycle: CycleInput, jobs: int) -> float:
    """Seconds per decision of the naive cycle: a fresh snapshot per pending job."""
    admitted = list(cycle.admitted)
    order = sorted(cycle.pending, key=lambda j: (j.created_at, -j.priority, j.job))[:jobs]
    started = time.perf_counter()
    for job in order:
        decision = decide(Snapshot(cycle.quotas, tuple(admitted)), job)
        if decision.outcome == "admit":
            admitted.append(
                Admitted(job.job, job.quota, job.priority, job.resources, cycle.now)
            )
    return (time.perf_counter() - started) / max(1, len(order))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench dispatch")
    parser.add_argument("--pending", type=int, default=1_000)
    parser.add_argument("--baseline-jobs", type=int, default=20)
    args = parser.parse_args(argv)
    figures: dict[str, float] = {}
    for label, admitted in (("10k", 10_000), ("100k", 100_000)):
        cycle = world(admitted, args.pending)
        seconds, counts = timed_cycle(cycle)
        rate = args.pending / seconds
        per_baseline = baseline(cycle, args.baseline_jobs)
        figures[f"decisions_per_s_{label}"] = round(rate)
        figures[f"baseline_decisions_per_s_{label}"] = round(1 / per_baseline, 1)
        print(
            f"{admitted:,} admitted, {args.pending:,} pending: one cycle {seconds * 1000:,.0f} ms,"
            f" {rate:,.0f} decisions/s ({counts});"
            f" baseline (fresh snapshot per decision) {1 / per_baseline:,.1f} decisions/s"
        )
    ratio = figures["decisions_per_s_100k"] / figures["decisions_per_s_10k"]
    print(
        json.dumps(
            {
                "quotas": QUOTAS,
                "pending": args.pending,
                **figures,
                "ratio_100k_to_10k": round(ratio, 3),
            }
        )
    )
    return 0
