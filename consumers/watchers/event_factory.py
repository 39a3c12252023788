"""Facts → envelopes: the events of one cluster, with deterministic ids.

Ids come from (cluster, kind, uid, transition) (:func:`ledger.ids.fact_event_id`), so a
re-list, a restart or a redelivery yields the same event and the store keeps one copy. Only an
end the cluster gave no time for takes the caller's clock and is flagged ``estimated``.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from consumers.watchers.facts import JobFacts, NodeFacts, PodFacts
from consumers.watchers.workloads import WorkloadFacts
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import (
    WATCHER_SOURCE_PREFIX,
    JobAdmitted,
    JobDeleted,
    JobFailed,
    JobPreempted,
    JobQueued,
    JobRestarted,
    JobStarted,
    JobSubmitted,
    JobSucceeded,
    NodeCordoned,
    NodeRemoved,
    OccupancyEnded,
    OccupancyEndReason,
    OccupancyStarted,
    WorkloadCreated,
    WorkloadDeleted,
    WorkloadScaled,
    WorkloadUpdated,
)
from ledger.ids import fact_event_id

__all__ = ["EventFactory"]


class EventFactory:
    """Builds the envelopes of one cluster, with ids over (cluster, kind, uid, transition)."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.source = f"{WATCHER_SOURCE_PREFIX}{cluster}"

    def event_id(self, kind: str, uid: str, transition: str) -> UUID:
        return fact_event_id(self.cluster, kind, uid, transition)

    def envelope(
        self,
        data: EventData,
        *,
        kind: str,
        uid: str,
        transition: str,
        stream: str,
        occurred_at: datetime,
        observed_at: datetime,
    ) -> Envelope:
        return make_envelope(
            data,
            event_id=self.event_id(kind, uid, transition),
            stream=stream,
            occurred_at=occurred_at,
            observed_at=observed_at,
            source=self.source,
        )

    # jobs

    def job_submitted(self, job: JobFacts, now: datetime) -> Envelope:
        a = job.attribution
        data = JobSubmitted(
            job_uid=job.uid,
            name=job.name,
            namespace=job.namespace,
            kind=job.kind,
            framework=job.framework,
            workspace=a.workspace,
            quota=a.quota,
            user=a.user,
            priority=a.priority,
            billing_mode=a.billing_mode,
            replicas=job.replicas,
            max_run_seconds=job.max_run_seconds,
        )
        return self.envelope(
            data,
            kind=job.kind,
            uid=job.uid,
            transition="submitted",
            stream=f"job/{job.uid}",
            occurred_at=job.created_at or now,
            observed_at=now,
        )

    def job_transition(
        self,
        kind: str,
        job_uid: str,
        transition: str,
        at: datetime,
        now: datetime,
        *,
        reason: str | None = None,
        key: str | None = None,
    ) -> Envelope:
        model = {
            "queued": JobQueued,
            "admitted": JobAdmitted,
            "preempted": JobPreempted,
            "started": JobStarted,
            "succeeded": JobSucceeded,
            "failed": JobFailed,
            "deleted": JobDeleted,
            "restarted": JobRestarted,
        }[transition]
        data = model(job_uid=job_uid, by="kubernetes", reason=reason)
        return self.envelope(
            data,
            kind=kind,
            uid=job_uid,
            transition=f"{transition}/{key}" if key else transition,
            stream=f"job/{job_uid}",
            occurred_at=at,
            observed_at=now,
        )

    # services and notebooks (docs/workloads.md): ids per uid and transition as for jobs; a
    # scale keyed by the object's generation, an update by its template's revision

    def workload_created(self, w: WorkloadFacts, now: datetime) -> Envelope:
        a = w.attribution
        data = WorkloadCreated(
            job_uid=w.uid,
            name=w.name,
            namespace=w.namespace,
            workload=w.workload,
            kind=w.kind,
            workspace=a.workspace,
            quota=a.quota,
            user=a.user,
            priority=a.priority,
            billing_mode=a.billing_mode,
            replicas=w.replicas,
            replica=w.replica,
            revision=w.revision,
            spillover=w.spillover,
        )
        return self._workload_event(data, w.kind, w.uid, "created", w.created_at or now, now)

    def workload_scaled(self, w: WorkloadFacts, from_replicas: int, now: datetime) -> Envelope:
        data = WorkloadScaled(
            job_uid=w.uid, from_replicas=from_replicas, to_replicas=w.replicas, by=w.scaled_by
        )
        key = w.generation or w.resource_version
        return self._workload_event(data, w.kind, w.uid, f"scaled/{key}", w.scaled_at or now, now)

    def workload_updated(self, w: WorkloadFacts, now: datetime) -> Envelope:
        data = WorkloadUpdated(job_uid=w.uid, revision=w.revision, replica=w.replica)
        return self._workload_event(data, w.kind, w.uid, f"updated/{w.revision}", now, now)

    def workload_deleted(
        self, kind: str, uid: str, at: datetime, now: datetime, reason: str | None = None
    ) -> Envelope:
        data = WorkloadDeleted(job_uid=uid, reason=reason)
        return self._workload_event(data, kind, uid, "deleted", at, now)

    def _workload_event(
        self,
        data: EventData,
        kind: str,
        uid: str,
        transition: str,
        at: datetime,
        now: datetime,
    ) -> Envelope:
        return self.envelope(
            data,
            kind=kind,
            uid=uid,
            transition=transition,
            stream=f"job/{uid}",
            occurred_at=at,
            observed_at=now,
        )

    # occupancy

    def occupancy_started(
        self, pod: PodFacts, job_uid: str, now: datetime, node_flavor: str | None = None
    ) -> Envelope:
        """``node_flavor``: the flavor of the node the pod is bound to, if known (the
        occupancy's flavor when the pod names none)."""
        assert pod.scheduled_at is not None and pod.node is not None
        a, r = pod.attribution, pod.resources
        data = OccupancyStarted(
            occupancy_id=pod.uid,
            job_uid=job_uid,
            pod_uid=pod.uid,
            pod_name=pod.name,
            node=pod.node,
            flavor=pod.occupied_flavor(node_flavor),
            mgpu=r.mgpu,
            cpu_milli=r.cpu_milli,
            memory_mib=r.memory_mib,
            billing_mode=a.billing_mode,
            workspace=a.workspace,
            quota=a.quota,
            user=a.user,
            started_at=pod.scheduled_at,
        )
        return self.envelope(
            data,
            kind="Pod",
            uid=pod.uid,
            transition="occupancy-started",
            stream=f"job/{job_uid}",
            occurred_at=pod.scheduled_at,
            observed_at=now,
        )

    def occupancy_ended(
        self,
        pod_uid: str,
        job_uid: str,
        ended_at: datetime,
        reason: OccupancyEndReason,
        estimated: bool,
        now: datetime,
        started_at: datetime | None = None,
        pod_name: str = "",
    ) -> Envelope:
        if started_at is not None and ended_at < started_at:
            ended_at = started_at  # a clock can lag; an interval is never negative
        data = OccupancyEnded(
            occupancy_id=pod_uid,
            job_uid=job_uid,
            pod_uid=pod_uid,
            ended_at=ended_at,
            reason=reason,
            estimated=estimated,
            pod_name=pod_name,
        )
        return self.envelope(
            data,
            kind="Pod",
            uid=pod_uid,
            transition="occupancy-ended",
            stream=f"job/{job_uid}",
            occurred_at=ended_at,
            observed_at=now,
        )

    # nodes

    def node_registered(self, node: NodeFacts, now: datetime) -> Envelope:
        return self.envelope(
            node.registered,
            kind="Node",
            uid=node.uid,
            transition="registered",
            stream=f"node/{node.name}",
            occurred_at=node.created_at or now,
            observed_at=now,
        )

    def node_cordoned(self, node: NodeFacts, now: datetime) -> Envelope:
        return self.envelope(
            NodeCordoned(node=node.name, cordoned=node.unschedulable),
            kind="Node",
            uid=node.uid,
            transition=f"cordoned/{node.resource_version}",
            stream=f"node/{node.name}",
            occurred_at=node.cordoned_at or now,
            observed_at=now,
        )

    def node_removed(self, name: str, uid: str, at: datetime, now: datetime) -> Envelope:
        return self.envelope(
            NodeRemoved(node=name),
            kind="Node",
            uid=uid,
            transition="removed",
            stream=f"node/{name}",
            occurred_at=at,
            observed_at=now,
        )
