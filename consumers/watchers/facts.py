"""Kubernetes objects → the facts the ledger reads from them, with no state and no I/O.

One Pod, batch Job, Kubeflow job or Node (a raw JSON dict) becomes a frozen record: who owns a
pod, where and since when it occupies what, when it ended and why; what a job asks for and how
it ended; what a node offers. Every timestamp comes from the object itself (``PodScheduled``
transition, container ``finishedAt``, Job conditions, ``creationTimestamp``). Who pays and the
bounds on tenant input are the label contract's (:mod:`consumers.watchers.labels`); turning
facts into events is :mod:`consumers.watchers.event_factory`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from consumers.watchers.api_values import (
    MIB,
    object_meta,
    parse_quantity,
    parse_time,
    str_map,
)
from consumers.watchers.labels import (
    ANNOTATION_PREEMPTED,
    BATCH_COMPLETION_INDEX,
    BATCH_JOB_NAME,
    GPU_ANY,
    GPU_RESOURCE,
    LABEL_NODE_BILLING,
    LABEL_POOL,
    LABEL_RESOURCE_GROUP,
    NODE_BILLING_MODES,
    TRAINING_JOB_NAME,
    TRAINING_REPLICA_INDEX,
    TRAINING_REPLICA_TYPE,
    Attribution,
    Resources,
    bounded_text,
    clamped,
    max_run_seconds,
    node_flavor,
    template_resources,
)
from consumers.watchers.workloads import workload_owner
from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_NODE_GPUS,
    MAX_NODE_MEMORY_MIB,
    MAX_REPLICA_SPECS,
    MAX_REPLICAS,
    MAX_TEXT,
)
from ledger.events import NodeRegistered, OccupancyEndReason, ReplicaSpec

log = logging.getLogger(__name__)

__all__ = [
    "JOB_KINDS",
    "JobFacts",
    "NodeFacts",
    "OwnerRef",
    "PodFacts",
    "bare_pod_job",
    "job_facts",
    "node_facts",
    "pod_facts",
]

#: Job kinds the watcher follows → (framework, replica-spec field in ``spec``).
JOB_KINDS: Final[Mapping[str, tuple[str, str | None]]] = {
    "Job": ("none", None),
    "PyTorchJob": ("pytorch", "pytorchReplicaSpecs"),
    "TFJob": ("tensorflow", "tfReplicaSpecs"),
    "MPIJob": ("mpi", "mpiReplicaSpecs"),
}

# --- pods ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The job or workload a pod belongs to: its uid when the pod names it, else (kind?, name)
    to look up (a Deployment's replica names only its ReplicaSet)."""

    uid: str | None
    kind: str | None
    name: str


@dataclass(frozen=True, slots=True)
class _PodCost:
    attribution: Attribution
    resources: Resources
    flavor: str | None  # named by the pod (annotation, nodeSelector); None: its node's


class PodFacts:
    """What the ledger reads from a Pod; who pays and for what is parsed only when needed."""

    __slots__ = (
        "_cost",
        "_obj",
        "created_at",
        "deletion_at",
        "end_reason",
        "finished_at",
        "name",
        "namespace",
        "node",
        "owner",
        "phase",
        "replica",
        "resource_version",
        "scheduled_at",
        "terminal",
        "uid",
    )

    def __init__(self, obj: Mapping[str, Any], **facts: Any) -> None:
        self._obj = obj
        self._cost: _PodCost | None = None
        self.uid: str = facts["uid"]
        self.name: str = facts["name"]
        self.namespace: str = facts["namespace"]
        self.resource_version: int = facts["resource_version"]
        self.created_at: datetime | None = facts["created_at"]
        self.owner: OwnerRef | None = facts["owner"]  # None: a bare pod is its own job
        self.replica: str = facts["replica"]  # "<type>/<index>"
        self.node: str | None = facts["node"]
        self.scheduled_at: datetime | None = facts["scheduled_at"]  # PodScheduled=True
        self.phase: str = facts["phase"]
        self.terminal: bool = facts["terminal"]
        self.finished_at: datetime | None = facts["finished_at"]  # last container finishedAt
        self.end_reason: OccupancyEndReason = facts["end_reason"]
        self.deletion_at: datetime | None = facts["deletion_at"]

    def _costs(self) -> _PodCost:
        if self._cost is None:
            meta = object_meta(self._obj)
            labels = str_map(meta.get("labels"))
            annotations = str_map(meta.get("annotations"))
            spec = self._obj.get("spec") or {}
            resources, flavor = template_resources(spec, annotations)
            self._cost = _PodCost(
                Attribution.read(labels, annotations, self.namespace, spec.get("priority")),
                resources,
                flavor,
            )
        return self._cost

    @property
    def attribution(self) -> Attribution:
        return self._costs().attribution

    @property
    def resources(self) -> Resources:
        return self._costs().resources

    @property
    def flavor(self) -> str:
        """The flavor the pod asks for: its annotation, its nodeSelector's GPU model, else
        ``gpu/any``."""
        return self._costs().flavor or GPU_ANY

    @property
    def named_flavor(self) -> str | None:
        """The flavor the pod names itself (annotation, nodeSelector), None if it names none."""
        return self._costs().flavor

    def occupied_flavor(self, node_flavor: str | None) -> str:
        """The flavor of the pod's occupancy: the one it names, else its node's GPU model
        (``node_flavor``: ``gpu/<model>`` from the node's ``nvidia.com/gpu.product``
        label, None when unknown), else ``gpu/any``."""
        return self._costs().flavor or node_flavor or GPU_ANY


def _owner(meta: Mapping[str, Any], labels: Mapping[str, str]) -> OwnerRef | None:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") in JOB_KINDS:
            return OwnerRef(str(ref["uid"]), str(ref["kind"]), str(ref.get("name", "")))
    workload = workload_owner(meta, labels)
    if workload is not None:
        return OwnerRef(*workload)
    name = labels.get(TRAINING_JOB_NAME)
    if name:
        return OwnerRef(None, None, name)
    name = labels.get(BATCH_JOB_NAME) or labels.get("batch.kubernetes.io/job-name")
    if name:
        return OwnerRef(None, "Job", name)
    return None


def _replica(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    rtype = labels.get(TRAINING_REPLICA_TYPE) or labels.get("replica-type") or "worker"
    index = (
        labels.get(TRAINING_REPLICA_INDEX)
        or labels.get("replica-index")
        or labels.get(BATCH_COMPLETION_INDEX)
        or annotations.get(BATCH_COMPLETION_INDEX)
        or "0"
    )
    return f"{rtype.lower()}/{index}"


def _end_reason(
    status: Mapping[str, Any], phase: str, deleting: bool, annotations: Mapping[str, str]
) -> OccupancyEndReason:
    reason = str(status.get("reason") or "")
    if reason == "Evicted":
        return "evicted"
    for cond in status.get("conditions") or ():
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            if cond.get("reason") == "PreemptionByScheduler":
                return "preempted"
            if cond.get("reason") in ("EvictionByEvictionAPI", "TerminationByKubelet"):
                return "evicted"
    if ANNOTATION_PREEMPTED in annotations:
        return "preempted"  # the dispatcher reclaimed it (an idle-mode victim's pods)
    if deleting:
        return "deleted"
    return "failed" if phase == "Failed" else "completed"


def pod_facts(obj: Mapping[str, Any]) -> PodFacts:
    """Everything the ledger reads from one Pod object."""
    meta = object_meta(obj)
    labels = str_map(meta.get("labels"))
    annotations = str_map(meta.get("annotations"))
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = str(meta.get("namespace") or "default")
    node = spec.get("nodeName") or None
    scheduled_at = None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            scheduled_at = parse_time(cond.get("lastTransitionTime"))
    if node and scheduled_at is None:
        # bound without a condition time: the kubelet's start, else the creation
        scheduled_at = parse_time(status.get("startTime")) or parse_time(
            meta.get("creationTimestamp")
        )
    if not node:
        scheduled_at = None
    phase = str(status.get("phase") or "Pending")
    terminal = phase in ("Succeeded", "Failed")
    finished: datetime | None = None
    if terminal:
        for cs in status.get("containerStatuses") or ():
            term = (cs.get("state") or {}).get("terminated") or {}
            at = parse_time(term.get("finishedAt"))
            if at is not None and (finished is None or at > finished):
                finished = at
    deletion_at = parse_time(meta.get("deletionTimestamp"))
    return PodFacts(
        obj,
        uid=str(meta.get("uid") or ""),
        name=str(meta.get("name") or ""),
        namespace=namespace,
        resource_version=int(meta.get("resourceVersion") or 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        owner=_owner(meta, labels),
        replica=_replica(labels, annotations),
        node=node,
        scheduled_at=scheduled_at,
        phase=phase,
        terminal=terminal,
        finished_at=finished,
        end_reason=_end_reason(status, phase, deletion_at is not None, annotations),
        deletion_at=deletion_at,
    )


# --- jobs ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobFacts:
    uid: str
    name: str
    namespace: str
    kind: str
    framework: str
    resource_version: int
    created_at: datetime | None
    attribution: Attribution
    replicas: tuple[ReplicaSpec, ...]
    outcome: str | None  # "succeeded" | "failed"
    outcome_at: datetime | None
    outcome_reason: str | None
    deletion_at: datetime | None
    #: ``spec.suspend`` (batch) or ``spec.runPolicy.suspend`` (Kubeflow)
    suspend_requested: bool = False
    #: the ``Suspended`` condition's status (None: no such condition) and its
    #: ``lastTransitionTime``, ``reason``: what the job controller did with the request
    suspended: bool | None = None
    suspended_changed_at: datetime | None = None
    suspended_reason: str | None = None
    #: the declared maximum run time in seconds (``dlc.ledger/max-run-seconds``)
    max_run_seconds: int | None = None


def _suspension(
    kind: str, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[bool, bool | None, datetime | None, str | None]:
    """(requested, condition status, its transition time, its reason) of a job's suspension."""
    if kind == "Job":
        requested = bool(spec.get("suspend"))
    else:
        requested = bool((spec.get("runPolicy") or {}).get("suspend"))
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Suspended" and cond.get("status") in ("True", "False"):
            reason = cond.get("reason")
            return (
                requested,
                cond.get("status") == "True",
                parse_time(cond.get("lastTransitionTime")),
                bounded_text(str(reason), "condition reason", MAX_TEXT) if reason else None,
            )
    return requested, None, None, None


def _replica_spec(rtype: str, count: int, template: Mapping[str, Any]) -> ReplicaSpec:
    tmeta = object_meta(template)
    annotations = str_map(tmeta.get("annotations"))
    resources, flavor = template_resources(template.get("spec") or {}, annotations)
    return ReplicaSpec(
        replica_type=bounded_text(rtype, "replica type") or "worker",
        count=clamped(count, MAX_REPLICAS, "replica count"),
        flavor=flavor or GPU_ANY,
        mgpu=resources.mgpu,
        cpu_milli=resources.cpu_milli,
        memory_mib=resources.memory_mib,
    )


def job_facts(obj: Mapping[str, Any]) -> JobFacts:
    """A batch Job or a Kubeflow PyTorchJob / TFJob / MPIJob."""
    meta = object_meta(obj)
    kind = str(obj.get("kind") or "Job")
    framework, field = JOB_KINDS.get(kind, ("none", None))
    namespace = str(meta.get("namespace") or "default")
    spec = obj.get("spec") or {}
    labels = dict(str_map(meta.get("labels")))
    annotations = dict(str_map(meta.get("annotations")))
    replicas: list[ReplicaSpec] = []
    template_labels: Mapping[str, str] = {}
    template_annotations: Mapping[str, str] = {}
    spec_priority: Any = None
    if field is None:
        template = spec.get("template") or {}
        parallelism = spec.get("parallelism")
        count = int(parallelism) if parallelism is not None else 1
        replicas.append(_replica_spec("worker", count, template))
        templates = [template]
    else:
        templates = []
        for rtype, rspec in sorted((spec.get(field) or {}).items()):
            template = rspec.get("template") or {}
            count = int(rspec.get("replicas") if rspec.get("replicas") is not None else 1)
            replicas.append(_replica_spec(rtype.lower(), count, template))
            templates.append(template)
        if len(replicas) > MAX_REPLICA_SPECS:
            log.warning("%d replica specs, the first %d kept", len(replicas), MAX_REPLICA_SPECS)
            del replicas[MAX_REPLICA_SPECS:]
    for template in templates:
        tmeta = object_meta(template)
        template_labels = {**str_map(tmeta.get("labels")), **template_labels}
        template_annotations = {**str_map(tmeta.get("annotations")), **template_annotations}
        spec_priority = spec_priority or (template.get("spec") or {}).get("priority")
    attribution = Attribution.read(
        {**template_labels, **labels},
        {**template_annotations, **annotations},
        namespace,
        spec_priority,
    )
    outcome = outcome_reason = None
    outcome_at = None
    requested, suspended, suspended_at, suspended_reason = _suspension(
        kind, spec, obj.get("status") or {}
    )
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") in ("Complete", "Succeeded"):
            outcome, outcome_reason = "succeeded", cond.get("reason")
            outcome_at = parse_time(cond.get("lastTransitionTime"))
        elif cond.get("type") == "Failed":
            outcome, outcome_reason = "failed", cond.get("reason")
            outcome_at = parse_time(cond.get("lastTransitionTime"))
    return JobFacts(
        uid=str(meta.get("uid") or ""),
        name=str(meta.get("name") or ""),
        namespace=namespace,
        kind=kind,
        framework=framework,
        resource_version=int(meta.get("resourceVersion") or 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        attribution=attribution,
        replicas=tuple(replicas),
        outcome=outcome,
        outcome_at=outcome_at,
        outcome_reason=bounded_text(str(outcome_reason), "condition reason", MAX_TEXT)
        if outcome_reason
        else None,
        deletion_at=parse_time(meta.get("deletionTimestamp")),
        suspend_requested=requested,
        suspended=suspended,
        suspended_changed_at=suspended_at,
        suspended_reason=suspended_reason,
        max_run_seconds=max_run_seconds({**template_annotations, **annotations}),
    )


# --- nodes --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeFacts:
    uid: str
    name: str
    resource_version: int
    created_at: datetime | None
    unschedulable: bool
    cordoned_at: datetime | None
    registered: NodeRegistered


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    meta = object_meta(obj)
    labels = str_map(meta.get("labels"))
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    capacity = status.get("capacity") or status.get("allocatable") or {}
    mode = labels.get(LABEL_NODE_BILLING, "public")
    cordoned_at = None
    for taint in spec.get("taints") or ():
        if taint.get("key") == "node.kubernetes.io/unschedulable":
            cordoned_at = parse_time(taint.get("timeAdded"))
    name = str(meta.get("name") or "")
    return NodeFacts(
        uid=str(meta.get("uid") or name),
        name=name,
        resource_version=int(meta.get("resourceVersion") or 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        unschedulable=bool(spec.get("unschedulable")),
        cordoned_at=cordoned_at,
        registered=NodeRegistered(
            node=name,
            pool=bounded_text(labels.get(LABEL_POOL), LABEL_POOL) or "default",
            resource_group=bounded_text(labels.get(LABEL_RESOURCE_GROUP), LABEL_RESOURCE_GROUP)
            or "default",
            flavor=node_flavor(labels) or GPU_ANY,
            gpus=clamped(int(parse_quantity(capacity.get(GPU_RESOURCE))), MAX_NODE_GPUS, "GPUs"),
            cpu_milli=clamped(
                int(parse_quantity(capacity.get("cpu")) * 1000), MAX_CPU_MILLI, "CPU"
            ),
            memory_mib=clamped(
                int((parse_quantity(capacity.get("memory")) / MIB).to_integral_value()),
                MAX_NODE_MEMORY_MIB,
                "memory (MiB)",
            ),
            billing_mode=mode if mode in NODE_BILLING_MODES else "public",
        ),
    )


def bare_pod_job(pod: PodFacts) -> JobFacts:
    """A pod no job owns is its own single-replica job (uid = the pod's uid)."""
    r = pod.resources
    return JobFacts(
        uid=pod.uid,
        name=pod.name,
        namespace=pod.namespace,
        kind="Pod",
        framework="none",
        resource_version=pod.resource_version,
        created_at=pod.created_at,
        attribution=pod.attribution,
        replicas=(
            ReplicaSpec(
                replica_type="worker",
                count=1,
                flavor=pod.flavor,
                mgpu=r.mgpu,
                cpu_milli=r.cpu_milli,
                memory_mib=r.memory_mib,
            ),
        ),
        outcome=None,
        outcome_at=None,
        outcome_reason=None,
        deletion_at=pod.deletion_at,
    )
