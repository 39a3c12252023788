"""A schedule's outcome per quota, the same way for any run: the what-if table's cells.

The demo compares the trace's own schedule (the open-loop run: the cluster decided) with
the dispatcher's (a closed-loop run of the same rows, stopped at the window's end) quota by
quota, over the window. Both are read from their run's read models by the same rules, so a
difference is the schedule's, not the arithmetic's:

- the jobs are those submitted in the window; one ran if its first pod started before the
  window's end, was withdrawn if deleted before then without running, else still waits;
- a job's wait is its submission to its first pod running (``billing_occupancies``), so it
  counts the same in a run without dispatcher decisions;
- GPU-hours are its pods' occupancy inside the window, the utilisation those GPU-seconds
  over ``capacity_mgpu`` x the window;
- preemptions and lost GPU-hours are ``report preemptions``'s decided in the window;
- cost is the rated cost of the jobs' occupancy inside the window (``report cost --source
  rated --from --to`` by job), summed exactly per quota and rounded once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from sqlalchemy import Connection, text

from ledger.dispatch.runtimes import percentile
from projections.billing import ReportWindow, cost_report
from projections.dispatch.reports import DecisionWindow, preemptions_report

__all__ = ["ScheduleRow", "schedule_rows"]

MGPU_SECONDS_PER_GPU_HOUR = Decimal(1000 * 3600)


@dataclass(frozen=True)
class ScheduleRow:
    """One quota's figures for one run (``quota`` ``(all)``: the whole run)."""

    quota: str
    jobs: int
    started: int
    withdrawn: int
    waiting: int
    wait_p50_s: float | None
    wait_p95_s: float | None
    gpu_hours: Decimal
    utilisation: float | None
    preemptions: int
    lost_gpu_hours: Decimal
    cost_minor: int
    currency: str | None


_JOBS = """
SELECT j.job_uid, COALESCE(j.quota, wq.quota, '-') AS quota, j.submitted_at, j.deleted_at,
       min(o.started_at) AS first_start,
       COALESCE(sum(o.mgpu * GREATEST(0, EXTRACT(EPOCH FROM
         LEAST(COALESCE(o.ended_at, :wend), :wend) - GREATEST(o.started_at, :wstart)))), 0)
         AS mgpu_s
  FROM job_state j
  LEFT JOIN job_workspace_quotas wq ON wq.workspace = j.workspace
  LEFT JOIN billing_occupancies o ON o.job_uid = j.job_uid
 WHERE (CAST(:names AS text[]) IS NULL OR j.name = ANY(:names))
   AND j.submitted_at >= :wstart AND j.submitted_at < :wend
 GROUP BY j.job_uid, COALESCE(j.quota, wq.quota, '-'), j.submitted_at, j.deleted_at
"""


def _percentile(values: list[float], q: float) -> float | None:
    """Continuous percentile, as PostgreSQL's ``percentile_cont``; None without values."""
    return percentile(sorted(values), q) if values else None


def schedule_rows(
    conn: Connection,
    window: tuple[datetime, datetime],
    capacity_mgpu: int,
    names: Collection[str] | None = None,
) -> list[ScheduleRow]:
    """Per quota (and ``(all)`` last) the figures of the jobs named ``names`` (None: every
    job of the run) submitted in ``window``, over that window (module docstring)."""
    params = {
        "wstart": window[0],
        "wend": window[1],
        "names": None if names is None else sorted(names),
    }
    jobs = conn.execute(text(_JOBS), params).all()
    quota_of = {j.job_uid: j.quota for j in jobs}
    costs: dict[str, Decimal] = defaultdict(Decimal)
    currency: str | None = None
    inside = ReportWindow(start=window[0], end=window[1], as_of=None)
    for rated in cost_report(conn, ("job",), inside, source="rated"):
        if rated["job"] in quota_of:
            costs[quota_of[rated["job"]]] += Decimal(rated["cost_minor_precise"])
            currency = rated["currency"]
    lost: dict[str, list[Decimal]] = defaultdict(list)
    for p in preemptions_report(conn, DecisionWindow(start=window[0], end=window[1])):
        if p["victim_uid"] in quota_of:
            lost[quota_of[p["victim_uid"]]].append(Decimal(str(p["gpu_hours_lost"])))
    by_quota: dict[str, list[Any]] = defaultdict(list)
    for job in jobs:
        by_quota[job.quota].append(job)
    span = (window[1] - window[0]).total_seconds()

    def row(quota: str, members: list[Any], losses: list[Decimal], cost: Decimal) -> ScheduleRow:
        ran = [j for j in members if j.first_start is not None and j.first_start < window[1]]
        waits = [(j.first_start - j.submitted_at).total_seconds() for j in ran]
        withdrawn = sum(
            1
            for j in members
            if j not in ran and j.deleted_at is not None and j.deleted_at < window[1]
        )
        mgpu_s = sum((Decimal(j.mgpu_s) for j in members), Decimal(0))
        return ScheduleRow(
            quota=quota,
            jobs=len(members),
            started=len(ran),
            withdrawn=withdrawn,
            waiting=len(members) - len(ran) - withdrawn,
            wait_p50_s=_percentile(waits, 0.5),
            wait_p95_s=_percentile(waits, 0.95),
            gpu_hours=mgpu_s / MGPU_SECONDS_PER_GPU_HOUR,
            utilisation=float(mgpu_s) / (capacity_mgpu * span) if capacity_mgpu and span else None,
            preemptions=len(losses),
            lost_gpu_hours=sum(losses, Decimal(0)),
            cost_minor=int(cost.to_integral_value(ROUND_HALF_EVEN)),
            currency=currency,
        )

    rows = [
        row(q, by_quota[q], lost.get(q, []), costs.get(q, Decimal(0))) for q in sorted(by_quota)
    ]
    rows.append(
        row(
            "(all)",
            list(jobs),
            [x for v in lost.values() for x in v],
            sum(costs.values(), Decimal(0)),
        )
    )
    return rows
