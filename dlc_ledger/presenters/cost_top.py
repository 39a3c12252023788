"""The costliest jobs, users, quotas or workspaces of a window, with its total: what a
finance person or a team lead reads first (``/v1/cost/top``).

The ordering, the cut to N and the total are the billing room's
(:func:`projections.billing.top.cost_top`: in SQL from the ledger, rounded once so the
total is ``report cost``'s); here each group gains its GPU time in the window
(``report usage``'s, read for the N groups only) and, by job, what the job is
(:mod:`dlc_ledger.presenters.job_figures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from dlc_ledger.presenters.job_figures import gpu_fields, gpu_hours, job_usage
from projections.billing import ReportWindow, Source, billing_currency, cost_top, usage_report
from projections.jobs import jobs_by_uid

__all__ = ["JOB_FIELDS", "TopCost", "top_cost"]

#: what a job of a ``by=job`` top list shows besides its key (null for a group that is
#: no job: the invoices' rounding)
JOB_FIELDS = ("name", "workspace", "user", "quota", "status")


@dataclass(frozen=True)
class TopCost:
    """Rows costliest first, how many groups the window holds, and the window's total;
    amounts as ``cost_minor`` + ``cost_minor_precise`` + ``currency``."""

    rows: list[dict[str, Any]]
    groups: int
    total: dict[str, Any]


def _usage(conn: Connection, by: str, window: ReportWindow, keys: list[str]) -> dict[Any, int]:
    rows = usage_report(conn, (by,), window, only=(by, keys)) if keys else []
    return {row[by]: int(row["mgpu_seconds"]) for row in rows}


def top_cost(
    conn: Connection, by: str, window: ReportWindow, n: int, *, source: Source = "auto"
) -> TopCost:
    """The ``n`` costliest groups by ``by`` (job, user, quota, workspace) in ``window``."""
    top = cost_top(conn, by, window, n, source=source)
    keys = [row[by] for row in top.rows]
    total_usage = usage_report(conn, (), window)
    total_seconds = int(total_usage[0]["mgpu_seconds"]) if total_usage else 0
    total = {**top.total, "mgpu_seconds": total_seconds, "gpu_hours": gpu_hours(total_seconds)}
    if total["currency"] is None:
        total["currency"] = billing_currency(conn)
    if by != "job":
        seconds = _usage(conn, by, window, keys)
        rows = []
        for row in top.rows:
            mgpu_seconds = seconds.get(row[by], 0)
            rows.append({**row, "mgpu_seconds": mgpu_seconds, "gpu_hours": gpu_hours(mgpu_seconds)})
        return TopCost(rows, top.groups, total)
    jobs = jobs_by_uid(conn, keys, workspaces=window.workspaces)
    usage = job_usage(conn, window, keys)
    rows = []
    for row in top.rows:
        job = jobs.get(row["job"], {})
        rows.append(
            {
                "job": row["job"],
                **{field: job.get(field) for field in JOB_FIELDS},
                **gpu_fields(job, usage.get(row["job"])),
                **{k: v for k, v in row.items() if k != "job"},
            }
        )
        if not job:  # no job (the invoices' rounding): nothing it asks for
            rows[-1].update(gpu_request_mgpu=None, gpu_model=None)
    return TopCost(rows, top.groups, total)
