"""Prometheus metrics of the live dispatcher, named after Kueue's so an operator's
dashboards and habits carry over (``docs/metrics.md`` has the mapping).

Every cycle replaces the quota gauges with the figures the cycle decided on (the read
models' state, before its own decisions): a quota removed from the tree disappears
from the next scrape. Labels stay low-cardinality: quota name and resource key only.
Quantities are the store's units (e.g. ``gpu/any`` in thousandths of a GPU).
"""

from __future__ import annotations

from collections import Counter as Tally
from datetime import datetime

from prometheus_client import Counter, Gauge, Histogram

from ledger.dispatch import CycleInput, CycleResult

__all__ = [
    "ADMISSION_WAIT",
    "DECISIONS",
    "DECISION_SECONDS",
    "PENDING",
    "QUOTA_BORROWED",
    "QUOTA_LENT",
    "QUOTA_MAX",
    "QUOTA_NOMINAL",
    "QUOTA_USAGE",
    "record_cycle",
]

DECISION_SECONDS = Histogram(
    "dlc_dispatch_decision_seconds",
    "Duration of one cycle's decision (plan_cycle over projected state)",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
DECISIONS = Counter(
    "dlc_dispatch_decisions_total",
    "Decisions taken by the dispatcher, by outcome (admitted, preempting, pending)",
    ["outcome"],
)
QUOTA_USAGE = Gauge(
    "dlc_quota_resource_usage",
    "Resources used by admitted jobs in the quota's subtree (kueue_cluster_queue_resource_usage)",
    ["quota", "resource"],
)
QUOTA_NOMINAL = Gauge(
    "dlc_quota_nominal_quota",
    "Guaranteed resources (min) of the quota (kueue_cluster_queue_nominal_quota)",
    ["quota", "resource"],
)
QUOTA_MAX = Gauge(
    "dlc_quota_max_quota",
    "Ceiling (max) of the quota; usage above it is over-admission",
    ["quota", "resource"],
)
QUOTA_BORROWED = Gauge(
    "dlc_quota_borrowed_resources",
    "Usage above the quota's min, borrowed from its cohort",
    ["quota", "resource"],
)
QUOTA_LENT = Gauge(
    "dlc_quota_lent_resources",
    "Unused min of the quota that its siblings' borrowing occupies",
    ["quota", "resource"],
)
PENDING = Gauge(
    "dlc_pending_workloads",
    "Jobs waiting in the quota's queue after the cycle (kueue_pending_workloads)",
    ["quota"],
)
ADMISSION_WAIT = Histogram(
    "dlc_admission_wait_time_seconds",
    "Time from queued to admitted, per quota (kueue_admission_wait_time_seconds)",
    ["quota"],
    buckets=(1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600, 86400),
)


def record_cycle(cycle: CycleInput, result: CycleResult, seconds: float) -> None:
    """Update every dispatcher metric from one cycle's input, result and decision time."""
    DECISION_SECONDS.observe(seconds)
    DECISIONS.labels("admitted").inc(len(result.admissions))
    DECISIONS.labels("preempting").inc(len(result.preemptions))
    DECISIONS.labels("pending").inc(len(result.pending))
    _record_quotas(cycle)
    waiting = Tally(status.quota for status in result.pending)
    PENDING.clear()
    for node in cycle.quotas:
        PENDING.labels(node.name).set(waiting.get(node.name, 0))
    queued = {job.job: job for job in cycle.pending}
    for decision in result.admissions:
        job = queued.get(decision.job)
        if job is not None:
            ADMISSION_WAIT.labels(job.quota).observe(_seconds(cycle.now, job.created_at))


def _record_quotas(cycle: CycleInput) -> None:
    parents = {q.name: q.parent for q in cycle.quotas}
    used: dict[str, dict[str, float]] = {q.name: {} for q in cycle.quotas}
    for wl in cycle.admitted:
        name: str | None = wl.quota
        seen: set[str] = set()
        while name is not None and name in used and name not in seen:
            seen.add(name)
            for key, qty in wl.resources.items():
                used[name][key] = used[name].get(key, 0) + qty
            name = parents[name]
    borrowed: dict[str, dict[str, float]] = {}
    for gauge in (QUOTA_USAGE, QUOTA_NOMINAL, QUOTA_MAX, QUOTA_BORROWED, QUOTA_LENT):
        gauge.clear()
    for node in cycle.quotas:
        minimum = node.min or {}
        keys = set(used[node.name]) | set(minimum) | set(node.max)
        borrowed[node.name] = {
            k: max(0.0, used[node.name].get(k, 0) - minimum.get(k, 0)) for k in keys
        }
        for key in keys:
            QUOTA_USAGE.labels(node.name, key).set(used[node.name].get(key, 0))
            QUOTA_BORROWED.labels(node.name, key).set(borrowed[node.name][key])
            if key in minimum:
                QUOTA_NOMINAL.labels(node.name, key).set(minimum[key])
            if key in node.max:
                QUOTA_MAX.labels(node.name, key).set(node.max[key])
    # siblings' borrowing = the parent's children's total minus the node's own
    children_borrowed: dict[str | None, dict[str, float]] = {}
    for node in cycle.quotas:
        total = children_borrowed.setdefault(node.parent, {})
        for key, qty in borrowed[node.name].items():
            total[key] = total.get(key, 0) + qty
    for node in cycle.quotas:
        minimum = node.min or {}
        for key, guaranteed in minimum.items():
            idle = max(0.0, guaranteed - used[node.name].get(key, 0))
            own = borrowed[node.name].get(key, 0)
            taken = max(0.0, children_borrowed[node.parent].get(key, 0) - own)
            QUOTA_LENT.labels(node.name, key).set(min(idle, taken) if node.parent else 0)


def _seconds(now: datetime, then: datetime) -> float:
    return max(0.0, (now - then).total_seconds())
