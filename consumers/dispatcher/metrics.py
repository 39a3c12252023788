"""Prometheus metrics of the live dispatcher, named after Kueue's so an operator's
dashboards and habits carry over (``docs/metrics.md`` has the mapping).

Every cycle replaces the quota gauges with the figures the cycle decided on (the read
models' state, before its own decisions): a quota removed from the tree disappears
from the next scrape. Labels stay low-cardinality: quota name and resource key only.
Quantities are the store's units (e.g. ``gpu/any`` in thousandths of a GPU).

Services and notebooks count as jobs do: a running replica in its quota's usage (one on an
inner quota in that quota's, as the core places it on its own leaf, whose series are not
exported), a waiting replica in ``dlc_pending_workloads``; a replica admitted on public
resources (spillover) in no quota's usage (it runs outside the quota), counted in
``dlc_dispatch_decisions_total{outcome="spilled"}``.
"""

from __future__ import annotations

from collections import Counter as Tally
from datetime import datetime

from prometheus_client import Counter, Gauge, Histogram

from ledger.dispatch import CycleInput, CycleResult
from ledger.dispatch.capacity import Tree
from ledger.dispatch.cycle import placed
from ledger.dispatch.workloads import is_own_leaf
from ledger.events import QuotaSpec
from ledger.quotas import compute_usage, lent_outside

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
    "Decisions taken by the dispatcher, by outcome (admitted, preempting, pending, refused, "
    "spilled: admitted on public resources, beyond the quota)",
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
    DECISIONS.labels("refused").inc(len(result.refused))  # notebooks refused at start
    DECISIONS.labels("spilled").inc(sum(1 for d in result.admissions if d.spillover))
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
    """The quota gauges by the reports' arithmetic (:mod:`ledger.quotas.usage`, the
    figures of ``quotas tree``): borrowed and lent within lending limits, idle-mode jobs
    always borrowing, lent = what a quota lends outside its subtree."""
    for gauge in (QUOTA_USAGE, QUOTA_NOMINAL, QUOTA_MAX, QUOTA_BORROWED, QUOTA_LENT):
        gauge.clear()
    if not cycle.quotas:
        return
    # an inner quota's own workloads (services on the parent) on its own leaf, as the core
    # decides them: they count in the quota's subtree like its children's jobs
    cycle = placed(cycle)
    tree = Tree(cycle.quotas, ())
    specs = {
        q.name: QuotaSpec(
            quota_id=q.name,
            parent=q.parent,
            min={k: round(tree.min(q.name, k)) for k in tree.keys},
            max={k: round(v) for k, v in q.max.items()},
            lend_limit={k: round(v) for k, v in q.lend_limit.items()},
        )
        for q in cycle.quotas
    }
    used: dict[str, dict[str, int]] = {}
    idle: dict[str, dict[str, int]] = {}
    for wl in cycle.admitted:
        if wl.quota not in specs or not tree.is_leaf(wl.quota):
            continue  # the dispatcher admits to leaves only
        for key, qty in wl.resources.items():
            per = used.setdefault(wl.quota, {})
            per[key] = per.get(key, 0) + round(qty)
            if wl.billing_mode == "idle":
                part = idle.setdefault(wl.quota, {})
                part[key] = part.get(key, 0) + round(qty)
    rows = compute_usage(specs, used, idle)
    lent = lent_outside({q.name: q.parent for q in cycle.quotas}, rows)
    nodes = {q.name: q for q in cycle.quotas}
    for (quota, key), row in rows.items():
        if is_own_leaf(quota):
            continue  # a synthetic leaf: its figures are its inner quota's
        node = nodes[quota]
        minimum = node.min or {}
        if row.used or key in minimum or key in node.max:
            QUOTA_USAGE.labels(quota, key).set(row.used)
            QUOTA_BORROWED.labels(quota, key).set(row.borrowed)
        if key in minimum:
            QUOTA_NOMINAL.labels(quota, key).set(minimum[key])
            QUOTA_LENT.labels(quota, key).set(lent[(quota, key)])
        if key in node.max:
            QUOTA_MAX.labels(quota, key).set(node.max[key])


def _seconds(now: datetime, then: datetime) -> float:
    return max(0.0, (now - then).total_seconds())
