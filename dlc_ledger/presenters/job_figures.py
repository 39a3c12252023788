"""A job's GPU and cost figures, one shape for the lists a dashboard reads at a glance:
``/v1/jobs`` (each job of a page) and ``/v1/cost/top?by=job`` (each job of the top).

- ``gpu_request_mgpu``: what the job asks for, its replicas' count x mGPU summed;
- ``gpu_model``: the GPU model its GPU replicas name (flavor ``gpu/<model>``), else the
  models of the nodes it ran on (its occupancies' flavors; ``gpu/any`` names none),
  several joined by ``", "``; null when none is known;
- ``mgpu_seconds`` and ``gpu_hours``: the GPU time it occupied, as ``report usage``
  counts it (open intervals up to the cluster clock), GPU-hours to the micro-GPU-hour;
- on ``/v1/jobs``, its cost so far: what the rater posted to the ledger, the job's
  ``report cost --group-by job`` row (0 in the billing currency before any posting).

The figures of a page are read for its jobs only (``only=("job", uids)``): one query
each, whatever the number of jobs stored.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from sqlalchemy import Connection

from ledger.money import plain_decimal
from projections.billing import ReportWindow, billing_currency, cost_report, cost_row, usage_report
from projections.jobs import JobPage, list_jobs

__all__ = [
    "JobUsage",
    "gpu_fields",
    "gpu_hours",
    "gpu_model",
    "gpu_request_mgpu",
    "job_usage",
    "listed_jobs",
]

_MGPU_SECONDS_PER_GPU_HOUR = 3_600_000
_GPU_HOURS_STEP = Decimal("0.000001")
_ANY_MODEL = "gpu/any"


def gpu_hours(mgpu_seconds: int) -> str:
    """GPU-hours of ``mgpu_seconds`` as a decimal string, to the micro-GPU-hour
    (half-even; ``mgpu_seconds`` is the exact figure)."""
    hours = Decimal(mgpu_seconds) / _MGPU_SECONDS_PER_GPU_HOUR
    return plain_decimal(hours.quantize(_GPU_HOURS_STEP, ROUND_HALF_EVEN))


def _gpu_replicas(replicas: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in replicas if int(r.get("mgpu") or 0) > 0 and int(r.get("count", 1)) > 0]


def gpu_request_mgpu(replicas: Iterable[Mapping[str, Any]]) -> int:
    """The mGPU a job asks for: each replica spec's count x mGPU, summed."""
    return sum(int(r.get("count", 1)) * int(r["mgpu"]) for r in _gpu_replicas(replicas))


def _model(flavor: str | None) -> str | None:
    if flavor is None or not flavor.startswith("gpu/") or flavor == _ANY_MODEL:
        return None
    return flavor[len("gpu/") :]


def gpu_model(replicas: Iterable[Mapping[str, Any]], ran_on: Iterable[str]) -> str | None:
    """The GPU model a job's GPU replicas name, else the models of the flavors it ran on
    (``ran_on``); several joined by ``", "``, None when none is known."""
    named = {_model(r.get("flavor")) for r in _gpu_replicas(replicas)} - {None}
    models = named or {_model(flavor) for flavor in ran_on} - {None}
    return ", ".join(sorted(m for m in models if m)) or None


@dataclass(frozen=True)
class JobUsage:
    """A job's occupied GPU time in a window, and the GPU flavors it occupied."""

    mgpu_seconds: int
    flavors: tuple[str, ...]


def job_usage(conn: Connection, window: ReportWindow, uids: Collection[str]) -> dict[str, JobUsage]:
    """Per job of ``uids``, its GPU time in ``window`` (``report usage``'s figure) and the
    flavors it occupied GPUs of; a job with no GPU time is absent."""
    if not uids:
        return {}
    seconds: dict[str, int] = {}
    flavors: dict[str, list[str]] = {}
    for row in usage_report(conn, ("job", "flavor"), window, only=("job", list(uids))):
        if row["mgpu_seconds"] <= 0:
            continue
        uid = row["job"]
        seconds[uid] = seconds.get(uid, 0) + int(row["mgpu_seconds"])
        flavors.setdefault(uid, []).append(row["flavor"])
    return {uid: JobUsage(s, tuple(sorted(flavors[uid]))) for uid, s in seconds.items()}


def gpu_fields(job: Mapping[str, Any], usage: JobUsage | None) -> dict[str, Any]:
    """A job's ``gpu_request_mgpu``, ``gpu_model``, ``mgpu_seconds`` and ``gpu_hours``
    (``job``: a row of the jobs read model, with its ``replicas``)."""
    replicas = job.get("replicas") or ()
    mgpu_seconds = usage.mgpu_seconds if usage else 0
    return {
        "gpu_request_mgpu": gpu_request_mgpu(replicas),
        "gpu_model": gpu_model(replicas, usage.flavors if usage else ()),
        "mgpu_seconds": mgpu_seconds,
        "gpu_hours": gpu_hours(mgpu_seconds),
    }


def listed_jobs(
    conn: Connection,
    *,
    workspace: str | None = None,
    status: str | None = None,
    user: str | None = None,
    q: str | None = None,
    limit: int = 50,
    at: datetime | None = None,
    cursor: str | None = None,
    workspaces: Collection[str] | None = None,
    frameworks: Collection[str] | None = None,
) -> JobPage:
    """One page of ``list_jobs`` (same filters, order and cursor), each job with its GPU
    and cost figures (the module docstring): current, whatever ``at`` shows."""
    page = list_jobs(
        conn,
        workspace=workspace,
        status=status,
        user=user,
        q=q,
        limit=limit,
        at=at,
        cursor=cursor,
        workspaces=workspaces,
        frameworks=frameworks,
    )
    uids = [job["job_uid"] for job in page.jobs]
    window = ReportWindow(workspaces=None if workspaces is None else tuple(sorted(workspaces)))
    usage = job_usage(conn, window, uids)
    costs: dict[str, dict[str, Any]] = {}
    if uids:
        posted = cost_report(conn, ("job",), window, source="ledger", only=("job", uids))
        costs = {row.pop("job"): row for row in posted}
    zero = cost_row({}, Decimal(0), billing_currency(conn))
    jobs = [
        {
            **job,
            **gpu_fields(job, usage.get(job["job_uid"])),
            **costs.get(job["job_uid"], zero),
        }
        for job in page.jobs
    ]
    return JobPage(jobs, page.next_cursor)
