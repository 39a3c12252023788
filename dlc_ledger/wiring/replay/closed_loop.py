"""Closed-loop replay: the trace's jobs arrive suspended and run when the dispatcher says.

kubesim plays the trace in closed-loop mode (:class:`kubesim.closed_loop.ClosedLoopDriver`:
each job created suspended, run for its trace length once resumed, its work lost when
suspended again). This module moves virtual time in lockstep with the dispatcher, one cycle
instant at a time:

1. advance kubesim to the instant (arrivals, run ends, grace periods on the way);
2. settle: the watcher has published everything kubesim holds, the ingest consumer has
   stored it, the projector has projected it (the dispatcher decides from projected state);
3. ``dispatcher.cycle(now)``: decisions stored, then acted on through the Kubernetes API
   (resume, suspend), which kubesim applies at once at the same instant;
4. the next instant: one ``cycle`` later when the cycle changed the cluster (its actions
   must be watched, projected and confirmed); otherwise the next instant something happens
   by itself (:meth:`~kubesim.closed_loop.ClosedLoopDriver.next_instant`) rounded up to the
   cycle grid, so idle stretches (days, in openb) cost nothing. Policy timers (Balance's
   timeout, Intelligent's aging) therefore take effect at the next such instant.

With ``open_until`` (trace seconds) the trace's rows created before it are its history:
kubesim plays them open loop, as fast as the watcher keeps up
(:meth:`~kubesim.closed_loop.ClosedLoopDriver.play_history`), no dispatcher cycle runs
before that instant, and the lockstep loop starts there; the rows created from it on are
the live part, arriving suspended. The history's rows still running then occupy the quota
tree the dispatcher decides against, and play on to their own deletion.

The loop ends when every job has ended, or when nothing can change any more (no job due,
no timer, the last cycle did nothing): the jobs still queued then can never be admitted
as configured and are reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from kubernetes import client

from kubesim import KubeSim
from kubesim.closed_loop import ClosedLoopDriver
from kubesim.driver import TraceDriver
from kubesim.traces import Trace
from ledger.dispatch.runtimes import percentile
from ledger.errors import Invalid, Unavailable
from ledger.store.postgres import PostgresEventStore

if TYPE_CHECKING:  # the pipeline module is imported when a loop runs, not before
    from dlc_ledger.wiring.replay.pipeline import PipelineSite

__all__ = [
    "ClosedLoopFigures",
    "ClosedLoopRun",
    "CycleRunner",
    "DispatcherFactory",
    "closed_loop_figures",
    "run_closed_loop",
]


class CycleRunner(Protocol):
    """The dispatcher as the loop sees it: one cycle at a given instant of cluster time."""

    def cycle(self, now: datetime) -> Any: ...


#: builds the dispatcher for a run: the store, a Kubernetes API client on kubesim, the clock
DispatcherFactory = Callable[
    [PostgresEventStore, client.ApiClient, Callable[[], datetime]], CycleRunner
]


@dataclass
class ClosedLoopRun:
    """What the loop did: cycles, virtual time, the jobs' ends as kubesim saw them."""

    published: int
    ingested: int
    virtual_seconds: float
    cycles: int
    succeeded: int
    failed: int
    withdrawn: int
    restarts: int  # runs started again after a preemption
    unfinished: list[str] = field(default_factory=list)
    #: virtual seconds the loop stopped at (``until``), the jobs still running then and
    #: those still queued; None: it ran until every job ended or nothing could change
    stopped_at: float | None = None
    waiting: list[str] = field(default_factory=list)


@dataclass
class ClosedLoopFigures:
    """The closed loop's outcome as the store records it (``report waits | preemptions |
    goodput`` give the same figures by quota, priority and workspace)."""

    cycles: int = 0
    jobs: int = 0
    succeeded: int = 0
    failed: int = 0
    withdrawn: int = 0
    never_admitted: int = 0
    admitted: int = 0  # AdmissionDecided with outcome admit
    preemptions: int = 0  # PreemptionDecided
    victims: int = 0
    waits: int = 0
    wait_p50_s: float | None = None
    wait_p95_s: float | None = None
    wait_max_s: float | None = None
    gpu_hours: float = 0.0
    good_gpu_hours: float = 0.0
    goodput: float | None = None
    unfinished: list[str] = field(default_factory=list)
    stopped: bool = False  # at ``until``: ``running`` and ``waiting`` were left as they were
    running: int = 0
    waiting: int = 0

    def lines(self) -> list[str]:
        def s(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f} s"

        left = (
            f"{self.running} still running, {self.waiting} still queued at the stop"
            if self.stopped
            else f"{self.never_admitted} never admitted"
        )
        return [
            f"closed loop: {self.jobs} jobs in {self.cycles} cycles: {self.succeeded} succeeded,"
            f" {self.failed} failed, {self.withdrawn} withdrawn, {left}",
            f"admitted: {self.admitted}, preemptions: {self.preemptions} ({self.victims} victims)",
            f"waits: {self.waits}, p50 {s(self.wait_p50_s)}, p95 {s(self.wait_p95_s)},"
            f" max {s(self.wait_max_s)}",
            f"goodput: {self.good_gpu_hours:,.2f} of {self.gpu_hours:,.2f} GPU-hours ended in"
            f" success ({'-' if self.goodput is None else f'{self.goodput:.1%}'})",
            *(
                [f"never admitted: {', '.join(self.unfinished[:10])}"]
                if self.unfinished and not self.stopped
                else []
            ),
        ]


def _grid(seconds: float, step: float) -> float:
    return math.ceil(seconds / step) * step


def run_closed_loop(
    trace: Trace,
    site: PipelineSite,
    say: Callable[[str], None],
    interval: float,
    timeout: float,
    *,
    cycle_seconds: float,
    make_dispatcher: DispatcherFactory,
    until: float | None = None,
    bill_every: float | None = None,
    open_until: int | None = None,
    at_live: Callable[[], None] | None = None,
) -> ClosedLoopRun:
    """Play ``trace`` in closed loop with the dispatcher ``make_dispatcher`` builds (module
    docstring); returns once every job ended or nothing can change any more, or at
    ``until`` (virtual seconds): the cluster as it is then, jobs running and queued.
    ``bill_every`` (virtual seconds): a billing tick before the first cycle of each such
    stretch, so budgets see posted cost as the billing scheduler would post it.
    ``open_until`` (trace seconds): the rows created before it are history, played open
    loop with no cycle before it (module docstring); the run's jobs are the others.
    ``at_live``: called once the history is played, before the first cycle (what an
    operator changes as the live part begins, e.g. a quota created)."""
    from consumers.projector import Projector
    from dlc_ledger.services.billing import tick
    from dlc_ledger.wiring.replay.pipeline import Pipeline

    store = site.store
    from projections.registry import all_projections

    if cycle_seconds <= 0:
        raise Invalid("the cycle must be a positive number of seconds")
    projector = Projector(store, all_projections())

    def make_driver(sim: KubeSim) -> TraceDriver:
        # a window's rows the trace never ended run to the file's end, as in the open loop
        end = trace.end if trace.window or open_until is not None else None
        return ClosedLoopDriver(sim, trace, end=end, open_until=open_until, max_backlog=5_000)

    with Pipeline(trace, site, make_driver, say=say, interval=interval, timeout=timeout) as p:
        driver = p.driver
        assert isinstance(driver, ClosedLoopDriver) and p.watcher is not None
        api = client.ApiClient(client.Configuration(host=p.sim.url))
        dispatcher = make_dispatcher(store, api, p.sim.clock.now)
        t, cycles = 0.0, 0
        next_report = time.monotonic() + interval
        if open_until is not None:  # the history, open loop: no cycle before open_until

            def progress() -> None:
                nonlocal next_report
                now = time.monotonic()
                if now > p.deadline:
                    raise Unavailable("replay timed out while replaying the history")
                if now >= next_report:
                    p.report("history")
                    next_report = now + interval

            driver.play_history(
                lambda ready: p.wait(ready, "replaying history", poll=0.002), progress
            )
            t = float(open_until)
        if at_live is not None:
            at_live()
        stopped_at: float | None = None
        next_bill = 0.0
        while True:
            driver.run_until(t)
            p.settle(poll=0.005)
            projector.catch_up()
            if driver.finished:
                break
            if until is not None and t >= until:
                stopped_at = t
                break
            if time.monotonic() > p.deadline:
                raise Unavailable("replay timed out while cycling")
            if bill_every is not None and t >= next_bill:
                tick(store, p.sim.clock.now())
                projector.catch_up()
                next_bill = (t // bill_every + 1) * bill_every
            rv = p.sim.store.resource_version
            dispatcher.cycle(p.sim.clock.now())
            cycles += 1
            due = driver.next_instant()
            if p.sim.store.resource_version != rv:
                t += cycle_seconds  # it acted: watch, project and confirm one cycle later
            elif due is None:
                break  # nothing will ever change: what is queued can never be admitted
            else:
                t = max(t + cycle_seconds, _grid(due, cycle_seconds))
            if until is not None:
                t = min(t, until)
            if time.monotonic() >= next_report:
                p.report(f"cycle {cycles}")
                next_report = time.monotonic() + interval
        if not p.watcher.flush(60):
            raise Unavailable("the watcher could not persist its checkpoint")
        p.report("done")
        ends = [r.ended for r in driver.runs.values()]
        return ClosedLoopRun(
            published=p.published,
            ingested=p.ingested,
            virtual_seconds=p.sim.clock.seconds(),
            cycles=cycles,
            succeeded=ends.count("Succeeded"),
            failed=ends.count("Failed"),
            withdrawn=ends.count("Withdrawn"),
            restarts=sum(r.preemptions for r in driver.runs.values()),
            unfinished=driver.unfinished(),
            stopped_at=stopped_at,
            waiting=driver.waiting(),
        )


def closed_loop_figures(
    store: PostgresEventStore, run: ClosedLoopRun, since: datetime | None = None
) -> ClosedLoopFigures:
    """The run's figures from the store (after projection): decisions, waits, goodput;
    ``since`` (cluster time): waits closed and occupancies ended from then on only (the
    live part of a replay with a history)."""
    from projections.dispatch import DecisionWindow, decision_counts, goodput_report, wait_intervals

    window = DecisionWindow(start=since)
    with store.reading() as conn:
        counts = decision_counts(conn)
        waits = sorted(
            float(w.wait_s) for w in wait_intervals(conn, window) if w.admitted_at is not None
        )
        goodput = goodput_report(conn, "quota", window)
    gpu = float(sum(r["gpu_hours"] for r in goodput))
    good = float(sum(r["good_gpu_hours"] for r in goodput))
    return ClosedLoopFigures(
        cycles=run.cycles,
        jobs=run.succeeded + run.failed + run.withdrawn + len(run.unfinished),
        succeeded=run.succeeded,
        failed=run.failed,
        withdrawn=run.withdrawn,
        never_admitted=0 if run.stopped_at is not None else len(run.unfinished),
        admitted=int(counts.get("admitted", 0)),
        preemptions=int(counts.get("preemptions", 0)),
        victims=int(counts.get("victims", 0)),
        waits=len(waits),
        wait_p50_s=_percentile(waits, 0.5),
        wait_p95_s=_percentile(waits, 0.95),
        wait_max_s=waits[-1] if waits else None,
        gpu_hours=gpu,
        good_gpu_hours=good,
        goodput=good / gpu if gpu else None,
        unfinished=run.unfinished,
        stopped=run.stopped_at is not None,
        running=len(run.unfinished) - len(run.waiting),
        waiting=len(run.waiting),
    )


def _percentile(values: list[float], q: float) -> float | None:
    """Continuous percentile of ascending ``values``, as PostgreSQL's percentile_cont."""
    return percentile(values, q) if values else None
