"""One live dispatcher cycle: read projected state, decide, store the decisions, then act.

:meth:`Dispatcher.cycle` reads the cycle's input (:func:`projections.dispatch.reads.
read_dispatch`), calls the pure :func:`ledger.dispatch.plan_cycle`, stores every decision
through the store port *before* acting (deterministic ids: a retried cycle stores
nothing twice), then acts through the :class:`~consumers.dispatcher.actuator.Actuator`:
resume each admitted job, suspend each victim (and delete an idle-mode victim's pods).
An action is repeated every cycle until the watched state confirms it (the admitted job
no longer waits; the victim no longer occupies); a failed call is logged and retried
next cycle. After a call the API server failed (throttled, 5xx, unreachable) the cycle's
remaining calls wait for the next cycle too: no hammering a failing server, and the
cluster sees the calls in the order decided. A quota change never evicts by itself: only
a preemption decision suspends.

The budgets seam (:class:`BudgetGate`) gives the workspaces whose ``stop`` budget is
exhausted (nothing of theirs is admitted) and the jobs to stop (suspended, never a
subscription ``quota``-mode job).

Services and notebooks (docs/dispatch.md, "Services and notebooks") are decided replica by
replica: an admitted replica's pod has its admission gate lifted, a preempted one's pod is
deleted (:meth:`~consumers.dispatcher.actuator.Actuator.release_replicas`, once per
workload with the replicas it may run); a notebook refused at start is scaled to none
(:meth:`~consumers.dispatcher.actuator.Actuator.refuse`), every cycle until it no longer
asks for one. A running service or notebook whose workspace's ``stop`` budget is exhausted
(a pay-as-you-go one, as jobs) or whose quota's subscribed capacity was released (whatever
it pays) is stopped: a ``stop`` decision naming the workload (reason ``BudgetExhausted`` or
``SubscriptionExpired``), then scaled to none through the same call, with its reason,
every cycle until it asks for none. A prepaid (``quota``) service of such a workspace keeps
its replicas within the quota; those it runs on public resources (spillover: they pay as
they go) are stopped one by one: a ``stop`` decision naming the replica, then its pod
deleted (as a preempted replica's: its controller makes it again, gated, and it waits).

A running job past its declared maximum run time (:mod:`ledger.dispatch.timeouts`) is
stopped for good: a ``stop`` decision (``MaxRunTimeExceeded``) is stored, then the actuator
ends it (:meth:`~consumers.dispatcher.actuator.Actuator.stop`), every cycle until it no
longer runs; it is never suspended (a suspended job queues again).

Poison (issue 44): a job whose decision event cannot be built (a request stored before its
bound existed, so the decision's figures break theirs; arithmetic that overflows:
:func:`ledger.store.failures.is_poison`) is left out of the cycle: nothing is stored or
done for it (an admission is not resumed, a preemption's victims are not suspended) and it
is dead-lettered (source ``dispatcher/decision``, reason ``decision-failed``, payload its
uid). The other jobs are decided and acted on. Every cycle looks at it again, the letter
reopening while it still fails. Anything else (an outage, a bug) fails the cycle as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

import orjson
from sqlalchemy import Connection

from consumers.dispatcher import metrics
from consumers.dispatcher.actuator import ActuationError, Actuator, JobRef
from consumers.dispatcher.decisions import (
    Figures,
    admission_event,
    pending_event,
    preemption_event,
    record_of,
    refusal_event,
    spill_stop_event,
    stop_event,
    workload_stop_event,
)
from ledger.dispatch import CycleInput, CycleResult, plan_cycle
from ledger.dispatch.cycle import relevant_changes
from ledger.dispatch.estimates import StartEstimate
from ledger.dispatch.timeouts import Overrun, overruns
from ledger.envelopes import Envelope
from ledger.events import AdmissionDecided, PreemptionDecided
from ledger.store.base import DuplicateEventConflict, EventStore
from ledger.store.failures import is_poison
from ledger.subscriptions import released_quotas
from projections.dispatch import (
    DecisionRecord,
    DispatchJob,
    DispatchView,
    max_run_times,
    read_dispatch,
    run_times,
    start_estimates,
)
from projections.subscriptions import load_subscriptions

__all__ = [
    "DECISION_FAILED_REASON",
    "DECISION_FAILED_SOURCE",
    "BudgetGate",
    "CycleOutcome",
    "Dispatcher",
]

log = logging.getLogger(__name__)

#: The ``source`` and ``reason`` of the dead letter of a job whose decision cannot be built.
DECISION_FAILED_SOURCE = "dispatcher/decision"
DECISION_FAILED_REASON = "decision-failed"

#: billing modes a budget stop may suspend (pay-as-you-go); ``quota`` is prepaid
_PAY_AS_YOU_GO = frozenset({"public", "spot", "idle"})


class BudgetGate(Protocol):
    """What the budgets give the dispatcher each cycle (wired by the composition root)."""

    def exhausted_workspaces(self, conn: Connection, at: datetime) -> frozenset[str]:
        """Workspaces whose ``stop`` budget is exhausted at ``at``."""

    def jobs_to_stop(self, conn: Connection, at: datetime) -> Sequence[str]:
        """Uids of the running jobs those budgets stop."""


@dataclass(frozen=True)
class CycleOutcome:
    """What one cycle decided, stored and did."""

    at: datetime
    admitted: tuple[str, ...] = ()
    #: (preemptor, its victims)
    preemptions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    pending: int = 0
    #: decision events newly stored (a retried cycle stores none twice)
    stored: int = 0
    resumed: tuple[str, ...] = ()
    suspended: tuple[str, ...] = ()
    #: actions that failed, retried next cycle
    failures: tuple[str, ...] = ()
    #: admissions and victims decided, not yet confirmed by the watched state
    unconfirmed: int = 0
    budget_stopped: tuple[str, ...] = ()
    #: running jobs stopped because their quota's subscribed capacity was released
    released_stopped: tuple[str, ...] = ()
    #: running jobs stopped at their maximum run time (``MaxRunTimeExceeded``)
    max_run_stopped: tuple[str, ...] = ()
    #: jobs whose decision could not be built: left out of the cycle, dead-lettered
    quarantined: tuple[str, ...] = ()
    unplaced: int = 0
    #: notebooks (their replica units) refused at start
    refused: tuple[str, ...] = ()
    #: services and notebooks whose replicas were released (or preempted) through the API
    released: tuple[str, ...] = ()
    #: running services and notebooks scaled to none: (workload, BudgetExhausted or
    #: SubscriptionExpired)
    workloads_stopped: tuple[tuple[str, str], ...] = ()
    #: replicas a prepaid service ran on public resources, stopped by an exhausted budget
    spill_stopped: tuple[str, ...] = ()
    result: CycleResult = field(default_factory=CycleResult, repr=False)

    def summary(self) -> str:
        """One line for the CLI."""
        victims = sum(len(v) for _, v in self.preemptions)
        parts = [
            f"cycle at {self.at.isoformat()}",
            f"admitted {len(self.admitted)}",
            f"preemptions {len(self.preemptions)} ({victims} victims)",
            f"pending {self.pending}",
            f"stored {self.stored}",
            f"resumed {len(self.resumed)}",
            f"suspended {len(self.suspended)}",
            f"unconfirmed {self.unconfirmed}",
        ]
        if self.budget_stopped:
            parts.append(f"budget-stopped {len(self.budget_stopped)}")
        if self.released_stopped:
            parts.append(f"subscription-expired stopped {len(self.released_stopped)}")
        if self.max_run_stopped:
            parts.append(f"max-run stopped {len(self.max_run_stopped)}")
        if self.refused:
            parts.append(f"refused {len(self.refused)}")
        if self.workloads_stopped:
            parts.append(f"workloads stopped {len(self.workloads_stopped)}")
        if self.spill_stopped:
            parts.append(f"spilled replicas stopped {len(self.spill_stopped)}")
        if self.unplaced:
            parts.append(f"no quota {self.unplaced}")
        if self.quarantined:
            parts.append(f"dead-lettered {len(self.quarantined)}")
        if self.failures:
            parts.append(f"failed {len(self.failures)} (retried next cycle)")
        return ", ".join(parts)


Reads = Callable[[], AbstractContextManager[Connection]]


class Dispatcher:
    """The live loop's cycle. ``reads`` opens a connection to the read models (default:
    a snapshot of ``store``); ``refresh`` brings them up to date before a cycle (e.g. the
    projector's catch-up; the closed-loop replay quiesces its pipeline instead)."""

    def __init__(
        self,
        store: EventStore,
        actuator: Actuator,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        reads: Reads | None = None,
        refresh: Callable[[], None] | None = None,
        budgets: BudgetGate | None = None,
        estimate: bool = True,
    ) -> None:
        self.store = store
        #: store an estimated start with each pending decision
        self.estimate = estimate
        self.actuator = actuator
        self.clock = clock
        self.reads = reads or self._snapshot
        self.refresh = refresh
        self.budgets = budgets
        # decisions stored by this process the read model may not show yet
        self._recent: dict[str, DecisionRecord] = {}
        self._previous: CycleInput | None = None
        # quotas whose subscribed capacity was released, as of the last read
        self._released: frozenset[str] = frozenset()

    @contextmanager
    def _snapshot(self) -> Iterator[Connection]:
        with self.store.snapshot() as uow:
            yield uow.connection

    def read(self, now: datetime) -> tuple[DispatchView, Sequence[str]]:
        """The cycle's view at ``now`` and the jobs budgets stop."""
        bought = list(load_subscriptions(self.store).values())
        with self.reads() as conn:
            blocked: frozenset[str] = frozenset()
            to_stop: Sequence[str] = ()
            if self.budgets is not None:
                blocked = self.budgets.exhausted_workspaces(conn, now)
                to_stop = self.budgets.jobs_to_stop(conn, now)
            view = read_dispatch(
                conn, now, blocked_workspaces=blocked, recent=self._recent, subscriptions=bought
            )
        self._released = released_quotas(view.tree.specs, bought, now)
        for uid in [u for u in self._recent if u not in view.jobs]:
            del self._recent[uid]  # ended or gone: nothing left to confirm
        return view, to_stop

    def cycle(self, now: datetime | None = None) -> CycleOutcome:
        """Read, decide, store, act (see the module docstring)."""
        if self.refresh is not None:
            self.refresh()
        now = now or self.clock()
        view, to_stop = self.read(now)
        # BestEffortFIFO's parked heads are retried where capacity was freed or the tree
        # changed since the last cycle; a process that has no last cycle retries them all
        previous, self._previous = self._previous, view.cycle
        requeue = (
            relevant_changes(previous, view.cycle)
            if previous is not None
            else frozenset(q.name for q in view.cycle.quotas if q.parent is None)
        )
        view = replace(view, cycle=replace(view.cycle, requeue=requeue))
        started = time.perf_counter()
        result = plan_cycle(view.cycle)
        metrics.record_cycle(view.cycle, result, time.perf_counter() - started)
        over = self._overruns(view, now)
        dropped: dict[str, str] = {}
        events = self._decisions(view, result, now, dropped)
        figures = Figures(view.cycle)
        stops = [
            (
                o,
                self._guarded(
                    dropped, o.job, "stop", partial(stop_event, o, view.jobs[o.job], figures, now)
                ),
            )
            for o in over
        ]
        events += [e for _, e in stops if e is not None]
        over = tuple(o for o, e in stops if e is not None)
        halted = self._workload_stops(view)
        for workload, (reason, members) in sorted(halted.items()):
            build = partial(workload_stop_event, workload, reason, members, figures, now)
            event = self._guarded(dropped, workload, "stop", build)
            if event is None:
                del halted[workload]  # not stored: not acted on either
            else:
                events.append(event)
        shed = {
            uid: view.jobs[uid]
            for uid in sorted(view.spilled)
            if view.jobs[uid].workload_uid not in halted
            and view.jobs[uid].workspace in view.cycle.blocked_workspaces
        }
        for uid, unit in list(shed.items()):
            build = partial(spill_stop_event, unit, "BudgetExhausted", figures, now)
            event = self._guarded(dropped, uid, "stop", build)
            if event is None:
                del shed[uid]
            else:
                events.append(event)
        stored = self._store(events)
        if dropped:
            self._quarantine(dropped)
            # a job whose decision was not stored is not acted on either
            result = replace(
                result,
                admissions=tuple(d for d in result.admissions if d.job not in dropped),
                preemptions=tuple(d for d in result.preemptions if d.job not in dropped),
            )

        admit = {d.job for d in result.admissions} | set(view.admitting)
        victims = dict(view.stopping)
        for decision in result.preemptions:
            for v in decision.victims:
                victims.setdefault(v.job, decision.job)
        admit -= set(victims)  # an admission not yet carried out, now chosen as a victim
        admit -= set(shed)
        failures = _Failures()
        # a service's or notebook's replicas: released (or preempted, or a spilled one
        # stopped) per workload; one stopped whole is scaled to none instead
        removed = set(victims) | set(shed)
        units = {uid for uid in admit | removed if view.jobs[uid].workload != "job"}
        going = {u for u in units if view.jobs[u].workload_uid in halted}
        released = self._release(view, (admit & units) - going, (removed & units) - going, failures)
        refused = self._refuse(view, result, failures)
        workloads_stopped = [
            (workload, reason)
            for workload, (reason, members) in sorted(halted.items())
            if self._call(
                f"stop {workload}",
                failures,
                partial(self.actuator.refuse, _ref(workload, members[0]), reason),
            )
        ]
        admit -= units
        resumed = [uid for uid in sorted(admit) if self._act(view.jobs[uid], "resume", failures)]
        # a job past its maximum ends, whatever else was decided about it (a victim
        # suspended instead would queue again); its capacity frees as it stops
        limit = {o.job: o.max_seconds for o in over}
        max_run_stopped = [
            o.job
            for o in over
            if self._act(view.jobs[o.job], "stop", failures, max_run_seconds=o.max_seconds)
        ]
        suspended = [
            uid
            for uid in sorted(victims)
            if uid not in limit
            and uid not in units
            and self._act(view.jobs[uid], "suspend", failures)
        ]
        budget_stopped = [
            uid
            for uid in sorted(set(to_stop) - set(victims) - set(limit))
            if uid in view.jobs
            and view.jobs[uid].workload == "job"
            and view.jobs[uid].occupying
            and view.jobs[uid].billing_mode in _PAY_AS_YOU_GO
            and self._act(view.jobs[uid], "suspend", failures)
        ]
        # jobs still running on capacity released by an expiry (after its 24-hour grace)
        # or a cancellation: stopped whatever they pay; their quota admits nothing until
        # capacity is bought again (pending reason SubscriptionExpired, as `jobs why` says)
        released_stopped = [
            uid
            for uid, job in sorted(view.jobs.items())
            if job.quota in self._released
            and job.workload == "job"
            and job.occupying
            and uid not in victims
            and uid not in budget_stopped
            and uid not in limit
            and self._act(job, "suspend", failures)
        ]
        return CycleOutcome(
            at=now,
            admitted=tuple(d.job for d in result.admissions),
            preemptions=tuple((d.job, tuple(v.job for v in d.victims)) for d in result.preemptions),
            pending=len(result.pending),
            stored=stored,
            resumed=tuple(resumed),
            suspended=tuple(suspended),
            failures=tuple(failures),
            unconfirmed=len(admit) + len(victims),
            budget_stopped=tuple(budget_stopped),
            released_stopped=tuple(released_stopped),
            max_run_stopped=tuple(max_run_stopped),
            quarantined=tuple(sorted(dropped)),
            unplaced=len(view.unplaced),
            refused=tuple(refused),
            released=tuple(released),
            workloads_stopped=tuple(workloads_stopped),
            spill_stopped=tuple(u for u in shed if view.jobs[u].workload_uid in released),
            result=result,
        )

    # -- decide ----------------------------------------------------------------------------

    def _decisions(
        self, view: DispatchView, result: CycleResult, now: datetime, dropped: dict[str, str]
    ) -> list[tuple[Envelope, AdmissionDecided | PreemptionDecided]]:
        """The cycle's decision events; a job whose decision cannot be built is left out
        and named in ``dropped`` (uid -> the error) instead."""
        figures = Figures(view.cycle)
        jobs = view.jobs
        out: list[tuple[Envelope, AdmissionDecided | PreemptionDecided]] = []
        for decision in result.admissions:
            event = self._guarded(
                dropped,
                decision.job,
                "admit",
                partial(admission_event, decision, jobs[decision.job], figures, now),
            )
            if event is not None:
                out.append(event)
        for decision in result.preemptions:
            victims: Mapping[str, DispatchJob] = {v.job: jobs[v.job] for v in decision.victims}
            event = self._guarded(
                dropped,
                decision.job,
                "preempt",
                partial(preemption_event, decision, jobs[decision.job], victims, figures, now),
            )
            if event is not None:
                out.append(event)
        preempting = {d.job for d in result.preemptions}
        new = [
            status
            for status in result.pending
            if status.job not in preempting  # its preemption decision says why it waits
            and self._guarded(
                dropped,
                status.job,
                "pending",
                partial(
                    pending_event,
                    status,
                    jobs[status.job],
                    view.decisions.get(status.job),
                    figures,
                    now,
                ),
            )
            is not None
        ]
        for refusal in result.refused:
            event = self._guarded(
                dropped,
                refusal.job,
                "refuse",
                partial(refusal_event, refusal, jobs[refusal.job], figures, now),
            )
            if event is not None:
                out.append(event)
        starts = self._estimates(view, [s.job for s in new])
        for status in new:
            event = self._guarded(
                dropped,
                status.job,
                "pending",
                partial(
                    pending_event,
                    status,
                    jobs[status.job],
                    view.decisions.get(status.job),
                    figures,
                    now,
                    estimate=starts.get(status.job),
                ),
            )
            if event is not None:
                out.append(event)
        return out

    @staticmethod
    def _guarded(
        dropped: dict[str, str], uid: str, what: str, build: Callable[[], Envelope | None]
    ) -> tuple[Envelope, AdmissionDecided | PreemptionDecided] | None:
        """The job's decision event built by ``build`` (None: nothing to store), or None
        with the job named in ``dropped`` when its values cannot make one
        (:func:`ledger.store.failures.is_poison`); any other error is raised."""
        try:
            envelope = build()
            return None if envelope is None else _typed(envelope)
        except Exception as exc:
            if not is_poison(exc):
                raise
            dropped[uid] = f"{what}: {type(exc).__name__}: {exc}"
            return None

    def _quarantine(self, dropped: Mapping[str, str]) -> None:
        """Dead-letter the jobs whose decision could not be built (one letter per job)."""
        for uid, error in sorted(dropped.items()):
            log.warning(
                "job %s left out of this cycle, its decision cannot be built: %s", uid, error
            )
        with self.store.transaction() as uow:
            for uid, error in sorted(dropped.items()):
                uow.record_dead_letter(
                    source=DECISION_FAILED_SOURCE,
                    reason=DECISION_FAILED_REASON,
                    error=f"job {uid}: {error}",
                    payload=orjson.dumps({"job_uid": uid}),
                )

    def _estimates(self, view: DispatchView, jobs: Sequence[str]) -> dict[str, StartEstimate]:
        """Estimated starts and ranges of the jobs whose pending decision is stored now
        (``jobs why``'s estimator, :mod:`projections.dispatch.estimates`); none when
        estimating is off."""
        if not self.estimate or not jobs:
            return {}
        with self.reads() as conn:
            times = run_times(conn, view.jobs)
        try:
            return start_estimates(view, times, jobs)
        except ValueError:  # an estimate is an aid: it never stops a cycle's decisions
            log.exception("start estimates failed; pending decisions stored without them")
            return {}

    def _overruns(self, view: DispatchView, now: datetime) -> tuple[Overrun, ...]:
        """The running jobs past their declared maximum run time at ``now``."""
        running = [wl for wl in view.cycle.admitted if view.jobs[wl.job].occupying]
        if not running:
            return ()
        with self.reads() as conn:
            limits = max_run_times(conn, [wl.job for wl in running])
        return overruns(running, limits, now) if limits else ()

    def _store(self, events: list[tuple[Envelope, AdmissionDecided | PreemptionDecided]]) -> int:
        """Append the decisions in one transaction; one whose id is already stored with
        other figures (the same decision, retried after a crash) keeps the stored one."""
        batch = list(events)
        with self.store.transaction() as uow:
            while True:
                try:
                    result = uow.append([e for e, _ in batch])
                    break
                except DuplicateEventConflict as exc:
                    log.info("decision %s already stored: the stored one stands", exc.event_id)
                    batch = [(e, d) for e, d in batch if e.event_id != exc.event_id]
        duplicates = set(result.duplicates)
        new = [(e, d) for e, d in batch if e.event_id not in duplicates]
        for (envelope, data), position in zip(new, result.positions, strict=True):
            for record in record_of(data, envelope.occurred_at, position):
                self._recent[record.job_uid] = record
        return len(result.positions)

    # -- act -------------------------------------------------------------------------------

    def _release(
        self, view: DispatchView, admit: set[str], victims: set[str], failures: _Failures
    ) -> list[str]:
        """Release the admitted replicas of each workload named in ``admit`` or
        ``victims`` (its pods: the replicas it holds, not preempted, and those admitted);
        returns the workloads whose call went through."""
        by_workload: dict[str, list[DispatchJob]] = {}
        for job in view.jobs.values():
            if job.workload != "job":
                by_workload.setdefault(job.workload_uid, []).append(job)
        touched = sorted({view.jobs[uid].workload_uid for uid in admit | victims})
        done: list[str] = []
        for workload in touched:
            units = by_workload.get(workload, [])
            keep = [u for u in units if (u.occupying and u.uid not in victims) or u.uid in admit]
            first = units[0]
            ref = JobRef(workload, first.namespace, first.name, first.kind)
            shrink = any(u.uid in victims for u in units)
            pods = len(keep) * first.per_replica
            release = partial(self.actuator.release_replicas, ref, pods, shrink=shrink)
            if self._call(f"release {workload}", failures, release):
                done.append(workload)
        return done

    def _workload_stops(self, view: DispatchView) -> dict[str, tuple[str, list[DispatchJob]]]:
        """The services and notebooks to stop, by workload uid: (reason, its units). One
        holding (or admitted) a replica is stopped when its workspace's ``stop`` budget
        is exhausted and it pays as it goes (``BudgetExhausted``, as jobs: a subscription
        ``quota`` one never), or when its quota's subscribed capacity was released
        (``SubscriptionExpired``, whatever it pays)."""
        by_workload: dict[str, list[DispatchJob]] = {}
        for job in view.jobs.values():
            if job.workload != "job":
                by_workload.setdefault(job.workload_uid, []).append(job)
        out: dict[str, tuple[str, list[DispatchJob]]] = {}
        for workload, members in by_workload.items():
            first = members[0]
            if not first.desired:
                continue  # it asks for none (stopped already): its pods are going
            if not any(u.occupying or u.uid in view.admitting for u in members):
                continue  # nothing runs: its waiting replicas wait (BudgetExhausted, ...)
            if (
                first.workspace in view.cycle.blocked_workspaces
                and first.billing_mode in _PAY_AS_YOU_GO
            ):
                out[workload] = ("BudgetExhausted", members)
            elif first.quota is not None and first.quota in self._released:
                out[workload] = ("SubscriptionExpired", members)
        return out

    def _refuse(self, view: DispatchView, result: CycleResult, failures: _Failures) -> list[str]:
        """Refuse the notebooks refused now, or earlier and still asking (their unit)."""
        reasons = dict(view.refused)
        reasons.update((r.job, r.reason) for r in result.refused)
        done: list[str] = []
        for uid, reason in sorted(reasons.items()):
            job = view.jobs[uid]
            ref = JobRef(job.workload_uid, job.namespace, job.name, job.kind)
            if self._call(f"refuse {uid}", failures, partial(self.actuator.refuse, ref, reason)):
                done.append(uid)
        return done

    def _call(self, what: str, failures: _Failures, call: Callable[[], None]) -> bool:
        """One actuator call (see :meth:`_act`)."""
        if failures.api_failing:
            failures.append(f"{what}: deferred, the API server is failing")
            return False
        try:
            call()
        except ActuationError as exc:
            log.warning("%s failed, retried next cycle: %s", what, exc)
            failures.append(f"{what}: {exc}")
            failures.api_failing = failures.api_failing or exc.transient
            return False
        return True

    def _act(
        self, job: DispatchJob, action: str, failures: _Failures, *, max_run_seconds: int = 0
    ) -> bool:
        ref = JobRef(job.uid, job.namespace, job.name, job.kind)
        if failures.api_failing:
            # the API server is failing: the rest waits for the next cycle, in this order
            # (calls that skip a failed one would change the order the cluster sees)
            failures.append(f"{action} {job.uid}: deferred, the API server is failing")
            return False
        try:
            if action == "resume":
                self.actuator.resume(ref)
            elif action == "stop":
                self.actuator.stop(ref, max_run_seconds)
            else:
                if job.billing_mode == "idle":
                    self.actuator.delete_pods(ref)  # idle capacity is reclaimed at once
                self.actuator.suspend(ref)
        except ActuationError as exc:
            log.warning("%s of %s failed, retried next cycle: %s", action, job.uid, exc)
            failures.append(f"{action} {job.uid}: {exc}")
            failures.api_failing = failures.api_failing or exc.transient
            return False
        return True


def _ref(workload: str, unit: DispatchJob) -> JobRef:
    """A service or notebook on the cluster, from one of its units."""
    return JobRef(workload, unit.namespace, unit.name, unit.kind)


class _Failures(list[str]):
    """A cycle's failed (and deferred) actions; ``api_failing`` once one failed transiently."""

    api_failing = False


def _typed(
    envelope: Envelope,
) -> tuple[Envelope, AdmissionDecided | PreemptionDecided]:
    if envelope.type == "AdmissionDecided":
        return envelope, AdmissionDecided.model_validate(envelope.data)
    return envelope, PreemptionDecided.model_validate(envelope.data)
