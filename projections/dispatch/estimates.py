"""Start estimates from projected state: the run times they rest on, read.

Run times: the finished jobs' (Succeeded or Failed) times in Running, by comparable class
(:mod:`ledger.dispatch.runtimes`: same quota and similar GPU request, widening to the
workspace, then to all; a running job's conditional on its age), each bounded by the
job's declared maximum run time (:mod:`projections.dispatch.limits`). :func:`start_estimates`
hands them to the pure forward simulation (:mod:`ledger.dispatch.estimates`), one per tree
(cohort) the jobs wait in: the point estimate with every job running its median, and the
range (:func:`~ledger.dispatch.estimates.estimate_ranges`) over simulated futures drawn
from the distributions. ``report estimates`` measures the stored ones
(:mod:`projections.dispatch.reports`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, text

from ledger.dispatch.estimates import (
    MAX_STEPS,
    RANGE_QUANTILES,
    RANGE_SAMPLES,
    StartEstimate,
    ahead_of,
    estimate_ranges,
    estimate_starts,
    within_tree,
)
from ledger.dispatch.model import Admitted, Incoming
from ledger.dispatch.runtimes import FinishedRun, RunTime, RunTimeBook, gpu_request
from projections.dispatch.limits import max_run_times
from projections.dispatch.reads import DispatchView
from projections.jobs import job_state, job_workspace_quotas

__all__ = [
    "RunTimes",
    "describe_runtime",
    "projected_ends",
    "projected_now",
    "run_time_book",
    "run_times",
    "runtime_json",
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


def run_time_book(conn: Connection) -> RunTimeBook:
    """The finished jobs' (Succeeded, Failed) times in Running by class: their quota (the
    job's, else its workspace's binding), workspace and GPU request (replicas summed)."""
    s, b = job_state.c, job_workspace_quotas.c
    rows = conn.execute(
        select(func.coalesce(s.quota, b.quota), s.workspace, s.replicas, s.running_us)
        .select_from(job_state.outerjoin(job_workspace_quotas, b.workspace == s.workspace))
        .where(s.status.in_(_FINISHED), s.running_us > 0)
    )
    return RunTimeBook.of_runs(
        FinishedRun(
            quota,
            workspace,
            sum(int(r.get("count", 1)) * int(r.get("mgpu", 0)) for r in replicas or ()),
            int(running_us) / 1e6,
        )
        for quota, workspace, replicas, running_us in rows
    )


@dataclass(frozen=True)
class RunTimes:
    """What the estimates know of run times: the finished jobs' book and the maximum run
    times jobs declared (seconds, by uid)."""

    book: RunTimeBook = field(default_factory=RunTimeBook)
    limits: Mapping[str, int] = field(default_factory=dict)

    def running(self, wl: Admitted, now: datetime) -> RunTime | None:
        """The whole run time of an admitted job, conditional on how long it has run. A
        service's or notebook's replica has none (it runs until scaled down or stopped,
        which nothing foresees): it never ends in the simulation."""
        if wl.workload != "job":
            return None
        ran = max(0.0, (now - wl.admitted_at).total_seconds())
        return self.book.of(
            wl.quota, wl.workspace, gpu_request(wl.resources), ran=ran, cap=self._cap(wl.job)
        )

    def pending(self, job: Incoming) -> RunTime | None:
        """The run time of a pending job once admitted (a replica's: none, it runs on)."""
        if job.workload != "job":
            return None
        return self.book.of(
            job.quota, job.workspace, gpu_request(job.resources), cap=self._cap(job.job)
        )

    def _cap(self, uid: str) -> float | None:
        limit = self.limits.get(uid)
        return None if limit is None else float(limit)


def run_times(conn: Connection, jobs: Collection[str]) -> RunTimes:
    """The book of finished jobs and the declared maxima of ``jobs``."""
    return RunTimes(run_time_book(conn), max_run_times(conn, jobs))


def projected_ends(
    admitted: Sequence[Admitted], times: RunTimes, now: datetime
) -> dict[str, datetime]:
    """When each running job is expected to end: its start + the median of its run-time
    distribution (comparable finished jobs that ran longer than it has so far; one that
    outlived them all runs as long again; never past its declared maximum); with nothing
    known (no finished job, no maximum), none has a projected end."""
    ends: dict[str, datetime] = {}
    for wl in admitted:
        runtime = times.running(wl, now)
        if runtime is not None:
            ends[wl.job] = wl.admitted_at + timedelta(seconds=runtime.median)
    return ends


def runtime_json(runtime: RunTime) -> dict[str, Any]:
    """A run time as ``jobs why`` shows it: the median (``seconds``), the range's
    percentiles, and what it rests on."""
    low, high = RANGE_QUANTILES
    return {
        "seconds": runtime.median,
        "low_seconds": runtime.quantile(low),
        "high_seconds": runtime.quantile(high),
        "scope": runtime.scope if runtime.scope else ("tail" if runtime.tail else "max"),
        "name": runtime.name,
        "gpus": runtime.gpus,
        "jobs": runtime.jobs,
        "longer_than": runtime.ran,
        "tail_from": runtime.tail_from,
        "max_run_seconds": runtime.cap,
    }


def describe_runtime(runtime: RunTime) -> str:
    """One sentence: the median run time and what it rests on."""

    def span(seconds: float) -> timedelta:
        return timedelta(seconds=round(seconds))

    median = span(runtime.median)
    cap = f", at most its maximum {span(runtime.cap)}" if runtime.cap is not None else ""
    if runtime.tail_from is not None:
        return (
            f"it has run {span(runtime.ran)} and too few comparable finished jobs ran "
            f"longer: a heavy tail from {span(runtime.tail_from)}, median {median}{cap}"
        )
    if not runtime.samples:
        return f"no comparable finished job: it runs to its maximum {median}"
    where = {"quota": f"quota {runtime.name}", "workspace": f"workspace {runtime.name}"}
    scope = where.get(runtime.scope or "", "all quotas")
    gpus = "" if runtime.gpus is None else f" asking {_gpu_class_text(runtime.gpus)}"
    longer = f" that ran longer than {span(runtime.ran)}" if runtime.ran else ""
    return (
        f"run times of {runtime.jobs} finished job(s) of {scope}{gpus}{longer}: "
        f"median {median}{cap}"
    )


def _gpu_class_text(g: int) -> str:
    if g == 0:
        return "no GPU"
    if g == 1:
        return "up to 1 GPU"
    return f"{2 ** (g - 2) + 1}-{2 ** (g - 1)} GPUs" if g > 2 else "2 GPUs"


def start_estimates(
    view: DispatchView,
    times: RunTimes,
    jobs: Sequence[str],
    *,
    max_steps: int = MAX_STEPS,
    ranges: bool = True,
    samples: int = RANGE_SAMPLES,
) -> dict[str, StartEstimate]:
    """Estimated starts of pending ``jobs``: one simulation per tree they wait in, over the
    jobs ahead of them (:func:`~ledger.dispatch.estimates.ahead_of`), every job running
    its median; with ``ranges``, each estimate also carries its range (``low``, ``high``)
    from ``samples`` simulated futures."""
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
        running = {
            wl.job: rt for wl in tree.admitted if (rt := times.running(wl, cycle.now)) is not None
        }
        pending = {p.job: rt for p in tree.pending if (rt := times.pending(p)) is not None}
        started = {wl.job: wl.admitted_at for wl in tree.admitted}
        points = estimate_starts(
            tree,
            {job: started[job] + timedelta(seconds=rt.median) for job, rt in running.items()},
            {job: timedelta(seconds=rt.median) for job, rt in pending.items()},
            jobs=wanted,
            max_steps=max_steps,
        )
        # a job with no point estimate gets no range: its futures would cost as much for
        # as little (the horizon's, or none at all)
        ranged = [j for j, e in points.items() if e.basis == "simulated"]
        spans = (
            estimate_ranges(
                tree, running, pending, jobs=ranged, samples=samples, max_steps=max_steps
            )
            if ranges and ranged
            else {}
        )
        for job, point in points.items():
            if point.basis == "now":
                point = replace(point, low=point.start, high=point.start)
            elif job in spans and spans[job].low is not None:
                span = spans[job]
                point = replace(point, low=_floor(span.low), high=_ceil(span.high))
            out[job] = point
        done.update(wanted)
    return out


def _floor(at: datetime | None) -> datetime | None:
    """A range's low to the whole second below (a range is stated in whole seconds)."""
    return None if at is None else at.replace(microsecond=0)


def _ceil(at: datetime | None) -> datetime | None:
    """A range's high to the whole second above."""
    if at is None:
        return None
    whole = at.replace(microsecond=0)
    return whole + timedelta(seconds=1) if whole < at else whole
