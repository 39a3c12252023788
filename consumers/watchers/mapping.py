"""Kubernetes objects → domain facts and events, with no state and no I/O.

The watcher reads raw API objects (JSON dicts, never client models: parsing them into models
costs more than everything else together). This module turns one object into the facts the
ledger cares about — who owns a pod, where and since when it occupies what, when it ended and
why — and builds the envelopes with deterministic ids (:func:`ledger.ids.fact_event_id`), so a
re-list, a restart or a redelivery yields the same event and the store keeps one copy.

Every timestamp comes from the object itself (``PodScheduled`` transition, container
``finishedAt``, Job conditions, ``creationTimestamp``); only an end the cluster gave no time for
takes the caller's clock and is flagged ``estimated``. The label / annotation contract is in
``docs/watchers.md``.

A label or annotation is tenant input: a value outside its bound (``ledger.bounds``: a user
longer than a label value, an mGPU beyond a node's, text with NUL) is never published. It
falls back to what an absent one means (quantities: the bound) with a warning in the log, so
the object's facts are still recorded — a tenant cannot escape billing with an absurd label,
and the watcher never retries an object it cannot map.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final
from uuid import UUID

from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_FLAVOR,
    MAX_LABEL_VALUE,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_NODE_GPUS,
    MAX_NODE_MEMORY_MIB,
    MAX_PRIORITY,
    MAX_REPLICA_SPECS,
    MAX_REPLICAS,
    MAX_TEXT,
    MIN_PRIORITY,
    OutOfBounds,
    check_text,
)
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import (
    WATCHER_SOURCE_PREFIX,
    BillingMode,
    JobDeleted,
    JobFailed,
    JobRestarted,
    JobStarted,
    JobSubmitted,
    JobSucceeded,
    NodeCordoned,
    NodeRegistered,
    NodeRemoved,
    OccupancyEnded,
    OccupancyEndReason,
    OccupancyStarted,
    ReplicaSpec,
)
from ledger.ids import fact_event_id

log = logging.getLogger(__name__)

__all__ = [
    "ANNOTATION_FLAVOR",
    "ANNOTATION_GPU_MILLI",
    "DEFAULT_BILLING_MODE",
    "DEFAULT_USER",
    "JOB_KINDS",
    "LABEL_BILLING_MODE",
    "LABEL_PRIORITY",
    "LABEL_QUOTA",
    "LABEL_USER",
    "LABEL_WORKSPACE",
    "Attribution",
    "EventFactory",
    "JobFacts",
    "NodeFacts",
    "OwnerRef",
    "PodFacts",
    "job_facts",
    "node_facts",
    "node_flavor",
    "parse_quantity",
    "parse_time",
    "pod_facts",
]

LABEL_WORKSPACE: Final = "dlc.ledger/workspace"
LABEL_BILLING_MODE: Final = "dlc.ledger/billing-mode"
LABEL_QUOTA: Final = "dlc.ledger/quota"
LABEL_USER: Final = "dlc.ledger/user"
LABEL_PRIORITY: Final = "dlc.ledger/priority"
LABEL_POOL: Final = "dlc.ledger/pool"
LABEL_RESOURCE_GROUP: Final = "dlc.ledger/resource-group"
LABEL_NODE_BILLING: Final = "dlc.ledger/node-billing-mode"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
ANNOTATION_GPU_MILLI: Final = "dlc.ledger/gpu-milli"
ANNOTATION_FLAVOR: Final = "dlc.ledger/flavor"
GPU_RESOURCE: Final = "nvidia.com/gpu"
GPU_ANY: Final = "gpu/any"
TRAINING_JOB_NAME: Final = "training.kubeflow.org/job-name"
TRAINING_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
TRAINING_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
BATCH_JOB_NAME: Final = "job-name"
BATCH_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"

DEFAULT_BILLING_MODE: Final[BillingMode] = "public"
DEFAULT_USER: Final = "unknown"
BILLING_MODES: Final = frozenset({"quota", "public", "spot", "idle"})
NODE_BILLING_MODES: Final = frozenset({"subscription", "public", "spot"})

#: Job kinds the watcher follows → (framework, replica-spec field in ``spec``).
JOB_KINDS: Final[Mapping[str, tuple[str, str | None]]] = {
    "Job": ("none", None),
    "PyTorchJob": ("pytorch", "pytorchReplicaSpecs"),
    "TFJob": ("tensorflow", "tfReplicaSpecs"),
    "MPIJob": ("mpi", "mpiReplicaSpecs"),
}

_SUFFIX: Final[Mapping[str, Decimal]] = {
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_MIB = Decimal(2**20)


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``2``, ``16Gi``, ``1e3``) as a Decimal."""
    if value is None:
        return Decimal(0)
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = str(value).strip()
    if text.isdigit():
        return Decimal(int(text))
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix) and not (suffix == "E" and "e" in text.lower()[:-1]):
            try:
                return Decimal(text[: -len(suffix)]) * _SUFFIX[suffix]
            except InvalidOperation:
                break
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 API timestamp (``2026-11-01T00:00:00Z``) as an aware datetime."""
    if not text:
        return None
    cached = _TIMES.get(text)
    if cached is None:
        cached = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
        if len(_TIMES) > 100_000:
            _TIMES.clear()
        _TIMES[text] = cached
    return cached


_TIMES: dict[str, datetime] = {}


def _text(value: str | None, what: str, limit: int = MAX_LABEL_VALUE) -> str | None:
    """``value`` if it is storable text within ``limit``; else None (the default applies)."""
    if value is None:
        return None
    try:
        check_text(value, what, limit)
    except OutOfBounds as exc:
        log.warning("out-of-bounds %s ignored, its default applies: %s", what, exc)
        return None
    return value


def _clamp(value: int, high: int, what: str, low: int = 0) -> int:
    """``value`` within [low, high]: a quantity beyond its bound counts as the bound."""
    if low <= value <= high:
        return value
    log.warning("out-of-bounds %s %d counted as %d", what, value, min(high, max(low, value)))
    return min(high, max(low, value))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _str_map(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Attribution:
    """Who pays and how: read from labels, then annotations, then documented defaults."""

    workspace: str
    billing_mode: BillingMode
    quota: str | None
    user: str
    priority: int

    @staticmethod
    def read(
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        namespace: str,
        spec_priority: Any = None,
    ) -> Attribution:
        def pick(key: str) -> str | None:
            value = labels.get(key) or annotations.get(key)
            return _text(str(value), key) if value else None

        mode = pick(LABEL_BILLING_MODE)
        billing: BillingMode = mode if mode in BILLING_MODES else DEFAULT_BILLING_MODE  # type: ignore[assignment]
        priority_text = pick(LABEL_PRIORITY)
        try:
            priority = int(priority_text) if priority_text else int(spec_priority or 0)
        except ValueError:
            priority = 0
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            log.warning("out-of-bounds priority %d ignored, 0 applies", priority)
            priority = 0
        return Attribution(
            workspace=pick(LABEL_WORKSPACE) or namespace or "default",
            billing_mode=billing,
            quota=pick(LABEL_QUOTA),
            user=pick(LABEL_USER) or DEFAULT_USER,
            priority=priority,
        )


@dataclass(frozen=True, slots=True)
class Resources:
    mgpu: int
    cpu_milli: int
    memory_mib: int


def _template_resources(
    spec: Mapping[str, Any], annotations: Mapping[str, str]
) -> tuple[Resources, str | None]:
    """Requested resources of a pod spec; mGPU from the annotation when present."""
    cpu = mem = gpu = Decimal(0)
    for container in spec.get("containers") or ():
        res = container.get("resources") or {}
        requests = res.get("requests") or {}
        limits = res.get("limits") or {}
        cpu += parse_quantity(requests.get("cpu", limits.get("cpu")))
        mem += parse_quantity(requests.get("memory", limits.get("memory")))
        gpu += parse_quantity(requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE)))
    milli = annotations.get(ANNOTATION_GPU_MILLI)
    requested = _clamp(int(gpu * 1000), MAX_MGPU, "GPU request (mGPU)")
    try:
        mgpu = int(milli) if milli not in (None, "") else requested
    except ValueError:
        mgpu = requested
    if not 0 <= mgpu <= MAX_MGPU:
        log.warning(
            "out-of-bounds %s %r ignored, the GPU request applies", ANNOTATION_GPU_MILLI, milli
        )
        mgpu = requested
    flavor = _text(annotations.get(ANNOTATION_FLAVOR), ANNOTATION_FLAVOR, MAX_FLAVOR)
    if not flavor:
        selector = _str_map(spec.get("nodeSelector"))
        model = selector.get(LABEL_GPU_PRODUCT)
        flavor = _text(f"gpu/{model}", "nodeSelector flavor", MAX_FLAVOR) if model else None
    resources = Resources(
        mgpu,
        _clamp(int(cpu * 1000), MAX_CPU_MILLI, "CPU request (milli)"),
        _clamp(int((mem / _MIB).to_integral_value()), MAX_MEMORY_MIB, "memory request (MiB)"),
    )
    return resources, flavor


# --- pods ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The job a pod belongs to: its uid when the pod names it, else (kind?, name) to look up."""

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
            meta = _meta(self._obj)
            labels = _str_map(meta.get("labels"))
            annotations = _str_map(meta.get("annotations"))
            spec = self._obj.get("spec") or {}
            resources, flavor = _template_resources(spec, annotations)
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


def _end_reason(status: Mapping[str, Any], phase: str, deleting: bool) -> OccupancyEndReason:
    reason = str(status.get("reason") or "")
    if reason == "Evicted":
        return "evicted"
    for cond in status.get("conditions") or ():
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            if cond.get("reason") == "PreemptionByScheduler":
                return "preempted"
            if cond.get("reason") in ("EvictionByEvictionAPI", "TerminationByKubelet"):
                return "evicted"
    if deleting:
        return "deleted"
    return "failed" if phase == "Failed" else "completed"


def pod_facts(obj: Mapping[str, Any]) -> PodFacts:
    """Everything the ledger reads from one Pod object."""
    meta = _meta(obj)
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
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
        end_reason=_end_reason(status, phase, deletion_at is not None),
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


def _replica_spec(rtype: str, count: int, template: Mapping[str, Any]) -> ReplicaSpec:
    tmeta = _meta(template)
    annotations = _str_map(tmeta.get("annotations"))
    resources, flavor = _template_resources(template.get("spec") or {}, annotations)
    return ReplicaSpec(
        replica_type=_text(rtype, "replica type") or "worker",
        count=_clamp(count, MAX_REPLICAS, "replica count"),
        flavor=flavor or "gpu/any",
        mgpu=resources.mgpu,
        cpu_milli=resources.cpu_milli,
        memory_mib=resources.memory_mib,
    )


def job_facts(obj: Mapping[str, Any]) -> JobFacts:
    """A batch Job or a Kubeflow PyTorchJob / TFJob / MPIJob."""
    meta = _meta(obj)
    kind = str(obj.get("kind") or "Job")
    framework, field = JOB_KINDS.get(kind, ("none", None))
    namespace = str(meta.get("namespace") or "default")
    spec = obj.get("spec") or {}
    labels = dict(_str_map(meta.get("labels")))
    annotations = dict(_str_map(meta.get("annotations")))
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
        tmeta = _meta(template)
        template_labels = {**_str_map(tmeta.get("labels")), **template_labels}
        template_annotations = {**_str_map(tmeta.get("annotations")), **template_annotations}
        spec_priority = spec_priority or (template.get("spec") or {}).get("priority")
    attribution = Attribution.read(
        {**template_labels, **labels},
        {**template_annotations, **annotations},
        namespace,
        spec_priority,
    )
    outcome = outcome_reason = None
    outcome_at = None
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
        outcome_reason=_text(str(outcome_reason), "condition reason", MAX_TEXT)
        if outcome_reason
        else None,
        deletion_at=parse_time(meta.get("deletionTimestamp")),
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


def node_flavor(labels: Mapping[str, str]) -> str | None:
    """``gpu/<model>`` from a node's ``nvidia.com/gpu.product`` label, None without one
    (or with one beyond the flavor's bound)."""
    model = labels.get(LABEL_GPU_PRODUCT)
    return _text(f"gpu/{model}", LABEL_GPU_PRODUCT, MAX_FLAVOR) if model else None


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    meta = _meta(obj)
    labels = _str_map(meta.get("labels"))
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
            pool=_text(labels.get(LABEL_POOL), LABEL_POOL) or "default",
            resource_group=_text(labels.get(LABEL_RESOURCE_GROUP), LABEL_RESOURCE_GROUP)
            or "default",
            flavor=node_flavor(labels) or GPU_ANY,
            gpus=_clamp(int(parse_quantity(capacity.get(GPU_RESOURCE))), MAX_NODE_GPUS, "GPUs"),
            cpu_milli=_clamp(int(parse_quantity(capacity.get("cpu")) * 1000), MAX_CPU_MILLI, "CPU"),
            memory_mib=_clamp(
                int((parse_quantity(capacity.get("memory")) / _MIB).to_integral_value()),
                MAX_NODE_MEMORY_MIB,
                "memory (MiB)",
            ),
            billing_mode=mode if mode in NODE_BILLING_MODES else "public",
        ),
    )


# --- envelopes ----------------------------------------------------------------


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

    def bare_pod_job(self, pod: PodFacts) -> JobFacts:
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
