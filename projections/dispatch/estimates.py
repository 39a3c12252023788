"""Start estimates from projected state, and how good the stored ones were.

Expected run time: the median time in Running of the finished jobs (Succeeded or Failed)
of the job's quota; with none, of its workspace; with none, of all jobs. A running job's
projected end is its start plus the median of those that ran longer than it has so far
(run times are heavy-tailed: a job past the median is likely a long one); one that has run
longer than all of them is expected to run as long again. No user-declared duration is read (the
watchers carry none). :func:`start_estimates` hands these to the pure forward simulation
(:func:`ledger.dispatch.estimates.estimate_starts`), one per tree (cohort) the jobs wait
in. :func:`estimate_errors` compares the first estimate each wait stored (with a pending
``AdmissionDecided``) with its admission: ``report estimates``.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, func, select, text

from ledger.dispatch.estimates import (
    MAX_STEPS,
    StartEstimate,
    ahead_of,
    estimate_starts,
    within_tree,
)
from ledger.dispatch.model import Admitted, Incoming
from ledger.store.base import UnitOfWork
from projections.dispatch.reads import DispatchView
from projections.jobs import job_state, job_workspace_quotas

__all__ = [
    "Runtime",
    "RuntimeMedians",
    "estimate_errors",
    "projected_ends",
    "projected_now",
    "runtime_medians",
    "start_estimates",
]

_FINISHED = ("Succeeded", "Failed")


def projected_now(conn: Connection) -> datetime | None:
    """The latest instant a projected fact carries (cluster time): job status changes,
    pod starts and ends."""
    value = conn.execute(
        text(
            "SELECT GREATEST((SELECT max(status_since) FROM job_state),"
            " (SELECT max(started_at) FROM occupancy), (SELECT max(ended_at) FROM occupancy))"
        )
    ).scalar()
    return value if isinstance(value, datetime) else None


@dataclass(frozen=True)
class Runtime:
    """An expected run time and where it comes from."""

    seconds: float
    scope: Literal["quota", "workspace", "all"]
    #: the quota or workspace whose finished jobs it is the median of ("" for all)
    name: str
    #: how many finished jobs it is the median of
    jobs: int
    #: for a running job: the median of the finished jobs that ran at least this long
    longer_than: float = 0.0

    @property
    def duration(self) -> timedelta:
        return timedelta(seconds=self.seconds)

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "scope": self.scope,
            "name": self.name,
            "jobs": self.jobs,
            "longer_than": self.longer_than,
        }

    def describe(self) -> str:
        where = {"quota": f"quota {self.name}", "workspace": f"workspace {self.name}"}
        longer = (
            f" that ran longer than {timedelta(seconds=round(self.longer_than))}"
            if self.longer_than
            else ""
        )
        return (
            f"median run time of {self.jobs} finished job(s){longer} of "
            f"{where.get(self.scope, 'all quotas')}: {timedelta(seconds=round(self.seconds))}"
        )


def _median(ordered: Sequence[float]) -> float:
    n = len(ordered)
    middle = n // 2
    return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True)
class RuntimeMedians:
    """The run times (seconds in Running) of the finished jobs, sorted, per quota, per
    workspace and of all."""

    by_quota: Mapping[str, Sequence[float]] = field(default_factory=dict)
    by_workspace: Mapping[str, Sequence[float]] = field(default_factory=dict)
    overall: Sequence[float] = ()

    def of(self, quota: str | None, workspace: str | None, *, ran: float = 0.0) -> Runtime | None:
        """The expected run time of a job of ``quota`` and ``workspace`` that has run
        ``ran`` seconds so far: the median of its quota's finished jobs that ran longer,
        else of its workspace's, else of everyone's (a job past them all: None, as with
        no finished job at all)."""
        groups: tuple[tuple[Literal["quota", "workspace", "all"], str, Sequence[float]], ...] = (
            ("quota", quota or "", self.by_quota.get(quota or "", ())),
            ("workspace", workspace or "", self.by_workspace.get(workspace or "", ())),
            ("all", "", self.overall),
        )
        for scope, name, ordered in groups:
            longer = ordered[bisect.bisect_right(ordered, ran) :] if ran > 0 else ordered
            if longer:
                return Runtime(_median(longer), scope, name, len(longer), ran)
        return None


def runtime_medians(conn: Connection) -> RuntimeMedians:
    """The finished jobs' (Succeeded, Failed) times in Running, per quota (the job's, else
    its workspace's binding), per workspace and of all."""
    s, b = job_state.c, job_workspace_quotas.c
    rows = conn.execute(
        select(func.coalesce(s.quota, b.quota).label("q"), s.workspace, s.running_us)
        .select_from(job_state.outerjoin(job_workspace_quotas, b.workspace == s.workspace))
        .where(s.status.in_(_FINISHED), s.running_us > 0)
        .order_by(s.running_us)
    )
    by_quota: dict[str, list[float]] = {}
    by_workspace: dict[str, list[float]] = {}
    overall: list[float] = []
    for q, workspace, running_us in rows:
        seconds = int(running_us) / 1e6
        if q is not None:
            by_quota.setdefault(q, []).append(seconds)
        if workspace is not None:
            by_workspace.setdefault(workspace, []).append(seconds)
        overall.append(seconds)
    return RuntimeMedians(by_quota, by_workspace, overall)


def start_estimates(
    view: DispatchView,
    medians: RuntimeMedians,
    jobs: Sequence[str],
    *,
    max_steps: int = MAX_STEPS,
) -> dict[str, StartEstimate]:
    """Estimated starts of pending ``jobs``: one simulation per tree they wait in, over the
    jobs ahead of them (:func:`~ledger.dispatch.estimates.ahead_of`)."""
    cycle = view.cycle
    quota_of = {p.job: p.quota for p in cycle.pending}
    out: dict[str, StartEstimate] = {}
    done: set[str] = set()
    for uid in jobs:
        if uid in done or uid not in quota_of:
            continue
        in_tree = {p.job for p in within_tree(cycle, quota_of[uid]).pending}
        wanted = [j for j in jobs if j in in_tree]
        tree = ahead_of(within_tree(cycle, quota_of[uid]), wanted)
        out.update(
            estimate_starts(
                tree,
                projected_ends(tree.admitted, medians, cycle.now),
                {p.job: d for p in tree.pending if (d := _duration(medians, p)) is not None},
                jobs=wanted,
                max_steps=max_steps,
            )
        )
        done.update(wanted)
    return out


def projected_ends(
    admitted: Sequence[Admitted], medians: RuntimeMedians, now: datetime
) -> dict[str, datetime]:
    """When each running job is expected to end: its start + the median run time of the
    finished jobs (of its quota, else workspace, else all) that ran longer than it has so
    far; a job that has run longer than all of them runs as long again (its age doubled);
    with no finished job at all, none has a projected end."""
    ends: dict[str, datetime] = {}
    for wl in admitted:
        ran = max(0.0, (now - wl.admitted_at).total_seconds())
        runtime = medians.of(wl.quota, wl.workspace, ran=ran)
        if runtime is not None:
            ends[wl.job] = wl.admitted_at + runtime.duration
        elif medians.overall:
            ends[wl.job] = wl.admitted_at + 2 * timedelta(seconds=ran)
    return ends


def _duration(medians: RuntimeMedians, job: Incoming) -> timedelta | None:
    runtime = medians.of(job.quota, job.workspace)
    return runtime.duration if runtime is not None else None


def _error_figures(errors: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/mean of the absolute errors and the mean signed error, to a tenth of a second
    (estimates and starts are cluster instants to the second); None without errors."""
    names = ("p50_abs_error_seconds", "p95_abs_error_seconds", "mean_abs_error_seconds")
    if not errors:
        return dict.fromkeys((*names, "mean_error_seconds"))
    absolute = [abs(x) for x in errors]
    figures = (_percentile(absolute, 0.5), _percentile(absolute, 0.95), statistics.fmean(absolute))
    out: dict[str, float | None] = {n: round(v, 1) for n, v in zip(names, figures, strict=True)}
    out["mean_error_seconds"] = round(statistics.fmean(errors), 1)
    return out


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def estimate_errors(
    uow: UnitOfWork,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    per_job: bool = False,
) -> list[dict[str, Any]]:
    """Start estimates against actual starts, per wait: a job's pending episode (its
    preemptions so far) that has a pending AdmissionDecided and ends with an admission
    decided within [``start``, ``end``). Its estimate is the first ``estimated_start``
    stored with a pending decision of the episode; error = actual - estimated (positive:
    it started later than estimated). Summary rows per quota and ``(all)``: the waits, how
    many had an estimate, their absolute error's p50 / p95 / mean and the mean error; with
    ``per_job``, one row per wait (no estimate: ``estimated_start`` and error None)."""
    head = uow.head_position()
    waited: dict[tuple[str, int], str] = {}
    estimate: dict[tuple[str, int], tuple[datetime, datetime]] = {}
    actual: dict[tuple[str, int], tuple[datetime, str]] = {}
    after = 0
    while after < head:
        upto = min(head, after + 50_000)
        for event in uow.read_window(after, upto, types=["AdmissionDecided"]):
            data = event.data
            key = (str(data["job_uid"]), int(data.get("attempt", 0)))
            if data.get("outcome") == "pending":
                waited.setdefault(key, str(data.get("quota")))
                if data.get("estimated_start") and key not in estimate:
                    at = datetime.fromisoformat(str(data["estimated_start"]))
                    estimate[key] = (event.occurred_at, at)
            elif data.get("outcome") == "admit" and key not in actual:
                actual[key] = (event.occurred_at, str(data.get("quota")))
        after = upto
    episodes: list[dict[str, Any]] = []
    for key, quota in waited.items():
        if key not in actual:
            continue  # still waiting (or gone): nothing to compare with
        started, admitted_quota = actual[key]
        if (start is not None and started < start) or (end is not None and started >= end):
            continue
        decided_at, estimated = estimate.get(key, (None, None))
        episodes.append(
            {
                "job_uid": key[0],
                "attempt": key[1],
                "quota": admitted_quota or quota,
                "estimated_at": decided_at,
                "estimated_start": estimated,
                "actual_start": started,
                "error_seconds": (
                    None if estimated is None else (started - estimated).total_seconds()
                ),
            }
        )
    episodes.sort(key=lambda e: (e["actual_start"], e["job_uid"], e["attempt"]))
    if per_job:
        return episodes
    groups: dict[str | None, list[dict[str, Any]]] = {None: []}
    for e in episodes:
        groups.setdefault(e["quota"], []).append(e)
        groups[None].append(e)
    rows = []
    order: list[str | None] = [*sorted(q for q in groups if q is not None), None]
    for group in order:
        errors = [e["error_seconds"] for e in groups[group] if e["error_seconds"] is not None]
        rows.append(
            {
                "quota": group if group is not None else "(all)",
                "waits": len(groups[group]),
                "estimated": len(errors),
                **_error_figures(errors),
            }
        )
    return rows
