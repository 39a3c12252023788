"""A cycle's decisions as events: ``AdmissionDecided`` and ``PreemptionDecided``, with
deterministic ids so a retried cycle never stores a decision twice.

Ids are over (job, pending episode, what): an admission once per episode (``attempt``:
the job's preemptions so far); a preemption per set of victims (each with its own
episode); a pending decision per change of reason (the count of pending decisions the
episode already has); a stop at the job's maximum run time once per episode (an
``AdmissionDecided`` with outcome ``stop``, reason ``MaxRunTimeExceeded``); a notebook's
refusal at start once per episode (outcome ``refuse``, its reason); a running service or
notebook stopped by a budget or an expired subscription once per episode of the workload
(``stop``, on the workload's own stream, then scaled to none); a service replica
admitted on public resources (spillover) is an ``admit`` with reason ``Spillover``. Decisions go
on the stream ``dispatch/<job uid>`` (the preemptor's for a preemption); ``state`` holds
the quota figures the decision rests on: ``request``, and per quota of the job's path and
of each victim ``<quota>.used`` (before the decision), ``<quota>.min``, ``<quota>.max``
per resource key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from ledger.dispatch import Admitted, CycleInput, Decision, PendingStatus, Refusal
from ledger.dispatch.estimates import StartEstimate
from ledger.dispatch.timeouts import MAX_RUN_REASON, Overrun
from ledger.dispatch.workloads import SPILLOVER_REASON
from ledger.envelopes import Envelope, make_envelope
from ledger.events import AdmissionDecided, PreemptionDecided, Victim
from ledger.ids import deterministic_id
from projections.dispatch import DecisionRecord, DispatchJob

__all__ = [
    "DISPATCHER_SOURCE",
    "Figures",
    "admission_event",
    "pending_event",
    "preemption_event",
    "record_of",
    "refusal_event",
    "spill_stop_event",
    "stop_event",
    "workload_stop_event",
]

DISPATCHER_SOURCE = "dispatcher"


class Figures:
    """Quota figures of one cycle's input: usage per quota subtree, min and max."""

    def __init__(self, cycle: CycleInput) -> None:
        self.nodes = {q.name: q for q in cycle.quotas}
        self.used: dict[str, dict[str, float]] = {}
        for wl in cycle.admitted:
            self._add(wl)

    def _add(self, wl: Admitted) -> None:
        for quota in self.path(wl.quota):
            bucket = self.used.setdefault(quota, {})
            for key, qty in wl.resources.items():
                bucket[key] = bucket.get(key, 0) + qty

    def path(self, quota: str) -> list[str]:
        out: list[str] = []
        name: str | None = quota
        while name is not None and name in self.nodes and name not in out:
            out.append(name)
            name = self.nodes[name].parent
        return out

    def state(
        self, request: Mapping[str, float], quotas: Iterable[str]
    ) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {"request": _ints(request)}
        for quota in quotas:
            node = self.nodes.get(quota)
            if node is None:
                continue
            out[f"{quota}.used"] = _ints(self.used.get(quota, {}))
            if node.min:
                out[f"{quota}.min"] = _ints(node.min)
            if node.max:
                out[f"{quota}.max"] = _ints(node.max)
        return out

    def borrowing(self, quota: str, request: Mapping[str, float]) -> bool:
        """Whether ``quota`` uses more than its min once ``request`` is added."""
        node = self.nodes.get(quota)
        used = self.used.get(quota, {})
        minimum = (node.min if node is not None else None) or {}
        return any(used.get(k, 0) + q > minimum.get(k, 0) for k, q in request.items() if q)


def _ints(values: Mapping[str, float]) -> dict[str, int]:
    return {k: round(v) for k, v in sorted(values.items())}


def _envelope(
    data: AdmissionDecided | PreemptionDecided, uid: str, now: datetime, *parts: str
) -> Envelope:
    return make_envelope(
        data,
        event_id=deterministic_id("dispatch", uid, *parts),
        stream=f"dispatch/{uid}",
        occurred_at=now,
        observed_at=now,
        source=DISPATCHER_SOURCE,
    )


def admission_event(
    decision: Decision, job: DispatchJob, figures: Figures, now: datetime
) -> Envelope:
    quota = job.quota or ""
    data = AdmissionDecided(
        job_uid=job.uid,
        quota=quota,
        outcome="admit",
        # a spilled replica runs on public resources: it borrows nothing of its quota
        borrowing=not decision.spillover and figures.borrowing(quota, job.resources),
        state=figures.state(job.resources, figures.path(quota)),
        attempt=job.attempt,
        reason=SPILLOVER_REASON if decision.spillover else None,
    )
    return _envelope(data, job.uid, now, str(job.attempt), "admit")


def preemption_event(
    decision: Decision,
    job: DispatchJob,
    victims: Mapping[str, DispatchJob],
    figures: Figures,
    now: datetime,
) -> Envelope:
    quota = job.quota or ""
    chosen = [
        Victim(
            job_uid=v.job,
            quota=victims[v.job].quota or "",
            reason=v.reason,
            attempt=victims[v.job].attempt,
        )
        for v in decision.victims
    ]
    quotas = figures.path(quota) + [
        q for v in chosen for q in figures.path(v.quota) if q not in figures.path(quota)
    ]
    reasons = sorted({v.reason for v in chosen})
    data = PreemptionDecided(
        preemptor=job.uid,
        victims=tuple(chosen),
        reason=", ".join(reasons) or "Preemption",
        state=figures.state(job.resources, dict.fromkeys(quotas)),
        quota=quota,
        attempt=job.attempt,
    )
    who = ",".join(sorted(f"{v.job_uid}@{v.attempt}" for v in chosen))
    return _envelope(data, job.uid, now, str(job.attempt), "preempt", who)


def pending_event(
    status: PendingStatus,
    job: DispatchJob,
    previous: DecisionRecord | None,
    figures: Figures,
    now: datetime,
    estimate: StartEstimate | None = None,
) -> Envelope | None:
    """A pending decision when the job's reason changed since its latest decision of this
    episode (None: unchanged, nothing to store), with its estimated start and range if
    known."""
    same = previous if previous is not None and previous.attempt == job.attempt else None
    if same is not None and same.outcome == "pending" and same.reason == status.reason:
        return None
    count = same.pending_count if same is not None else 0
    quota = job.quota or ""
    data = AdmissionDecided(
        job_uid=job.uid,
        quota=quota,
        outcome="pending",
        state=figures.state(job.resources, figures.path(quota)),
        reason=status.reason,
        attempt=job.attempt,
        position=status.position,
        cohort_position=status.cohort_position,
        estimated_start=estimate.start if estimate else None,
        estimated_start_low=estimate.low if estimate else None,
        estimated_start_high=estimate.high if estimate and estimate.low else None,
    )
    return _envelope(data, job.uid, now, str(job.attempt), "pending", str(count + 1), status.reason)


def refusal_event(refusal: Refusal, job: DispatchJob, figures: Figures, now: datetime) -> Envelope:
    """A notebook refused at start (once per episode): it does not fit now, even with the
    preemption its quota's policies allow, and is not queued."""
    quota = job.quota or refusal.quota
    data = AdmissionDecided(
        job_uid=job.uid,
        quota=quota,
        outcome="refuse",
        state=figures.state(job.resources, figures.path(quota)),
        reason=refusal.reason,
        attempt=job.attempt,
    )
    return _envelope(data, job.uid, now, str(job.attempt), "refuse")


def stop_event(overrun: Overrun, job: DispatchJob, figures: Figures, now: datetime) -> Envelope:
    """The decision to stop a running job at its maximum run time (once per episode);
    ``state["run"]``: the seconds it had run and its maximum."""
    quota = job.quota or overrun.quota
    state = figures.state(job.resources, figures.path(quota))
    state["run"] = {"ran_seconds": int(overrun.ran_seconds), "max_run_seconds": overrun.max_seconds}
    data = AdmissionDecided(
        job_uid=job.uid,
        quota=quota,
        outcome="stop",
        state=state,
        reason=MAX_RUN_REASON,
        attempt=job.attempt,
    )
    return _envelope(data, job.uid, now, str(job.attempt), "stop")


def workload_stop_event(
    workload: str,
    reason: str,
    units: Sequence[DispatchJob],
    figures: Figures,
    now: datetime,
) -> Envelope:
    """The decision to stop a running service or notebook (``BudgetExhausted``: its
    workspace's ``stop`` budget is exhausted; ``SubscriptionExpired``: its quota's
    subscribed capacity was released), once per episode of the workload (its scales): an
    ``AdmissionDecided`` ``stop`` naming the workload, ``state["replicas"]`` the replicas
    it held; it is then scaled to none."""
    first = units[0]
    quota = first.quota or ""
    held = sum(1 for u in units if u.occupying)
    state = figures.state(first.resources, figures.path(quota))
    state["replicas"] = {"held": held, "per_replica": first.per_replica}
    data = AdmissionDecided(
        job_uid=workload,
        quota=quota,
        outcome="stop",
        state=state,
        reason=reason,
        attempt=first.attempt,
    )
    return _envelope(data, workload, now, str(first.attempt), "stop", reason)


def spill_stop_event(unit: DispatchJob, reason: str, figures: Figures, now: datetime) -> Envelope:
    """The decision to stop one replica a prepaid service runs on public resources
    (spillover: pay-as-you-go) when its workspace's ``stop`` budget is exhausted, once per
    episode of the replica: an ``AdmissionDecided`` ``stop`` naming the replica's unit,
    ``state["replicas"]`` saying it was spilled; its pod is then deleted and, made again
    gated by its controller, waits (``BudgetExhausted``)."""
    quota = unit.quota or ""
    state = figures.state(unit.resources, figures.path(quota))
    state["replicas"] = {
        "held": 1 if unit.occupying else 0,
        "per_replica": unit.per_replica,
        "spilled": 1,
    }
    data = AdmissionDecided(
        job_uid=unit.uid,
        quota=quota,
        outcome="stop",
        state=state,
        reason=reason,
        attempt=unit.attempt,
    )
    return _envelope(data, unit.uid, now, str(unit.attempt), "stop", reason)


def record_of(
    data: AdmissionDecided | PreemptionDecided, at: datetime, position: int
) -> list[DecisionRecord]:
    """The read model's records one stored decision sets (the loop's own, until the
    projection shows them)."""
    if isinstance(data, AdmissionDecided):
        return [
            DecisionRecord(
                data.job_uid,
                data.attempt,
                data.outcome,
                data.reason,
                data.quota,
                position=position,
                decided_at=at,
            )
        ]
    records = [
        DecisionRecord(
            data.preemptor,
            data.attempt,
            "preempt",
            data.reason,
            data.quota,
            victims=tuple(v.job_uid for v in data.victims),
            position=position,
            decided_at=at,
        )
    ]
    records += [
        DecisionRecord(
            v.job_uid,
            v.attempt,
            "victim",
            v.reason,
            v.quota,
            preemptor=data.preemptor,
            position=position,
            decided_at=at,
        )
        for v in data.victims
    ]
    return records
