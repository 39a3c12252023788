"""Services and notebooks as the watcher reads them: a Deployment, StatefulSet or
LeaderWorkerSet becomes one workload with replicas, and a replica pod finds its workload.

Training jobs keep their own facts (:mod:`consumers.watchers.facts`). A workload is what the
object declares (desired replicas, a replica's resources, its template's revision) plus who
pays, read with the same label contract as a job. How a pod finds its workload, since its
owner is not always the workload itself:

- a StatefulSet's pod is owned by the StatefulSet (its uid);
- a Deployment's pod is owned by a ReplicaSet named ``<deployment>-<pod-template-hash>``:
  the Deployment is found by that name without the hash (ReplicaSets are not watched);
- a LeaderWorkerSet's pods carry ``leaderworkerset.sigs.k8s.io/name``; the StatefulSets the
  LeaderWorkerSet makes are owned by it, so they are not workloads of their own.

A notebook is a workload labelled ``dlc.ledger/workload: notebook`` (on the object or its pod
template); docs/workloads.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from consumers.watchers.api_values import object_meta, parse_time, str_map
from consumers.watchers.labels import (
    GPU_ANY,
    Attribution,
    bounded_text,
    clamped,
    template_resources,
)
from ledger.bounds import MAX_NAME, MAX_REPLICAS
from ledger.events import ReplicaSpec, Spillover, WorkloadKind

__all__ = [
    "ANNOTATION_SPILLOVER",
    "LABEL_LWS_NAME",
    "LABEL_WORKLOAD",
    "WORKLOAD_OBJECT_KINDS",
    "WorkloadFacts",
    "workload_facts",
    "workload_owner",
]

#: the Kubernetes kinds watched as services (and notebooks, when labelled so)
WORKLOAD_OBJECT_KINDS: Final = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet"})
LABEL_WORKLOAD: Final = "dlc.ledger/workload"
#: ``public``: replicas beyond the quota's capacity run on public resources (billed by use)
ANNOTATION_SPILLOVER: Final = "dlc.ledger/spillover"
LABEL_LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
POD_TEMPLATE_HASH: Final = "pod-template-hash"


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    """What the ledger reads from a workload object."""

    uid: str
    name: str
    namespace: str
    kind: str  # Deployment | StatefulSet | LeaderWorkerSet
    workload: WorkloadKind
    resource_version: int
    generation: int
    created_at: datetime | None
    deletion_at: datetime | None
    attribution: Attribution
    replicas: int  # desired
    replica: ReplicaSpec  # one replica's pods (a LeaderWorkerSet group: size pods)
    revision: str  # a hash of the pod template(s)
    spillover: Spillover
    #: owned by another object (a LeaderWorkerSet's StatefulSets): not a workload of its own
    owned: bool
    #: when and by whom the desired replicas were last set, as managedFields say
    scaled_at: datetime | None
    scaled_by: str | None


def _revision(templates: object) -> str:
    """A stable hash of the pod template(s): a rolling update changes it, a scale does not."""
    digest = hashlib.sha256(orjson.dumps(templates, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return digest[:16]


def _replica(template: Mapping[str, Any], count: int, replica_type: str) -> ReplicaSpec:
    tmeta = object_meta(template)
    resources, flavor = template_resources(
        template.get("spec") or {}, str_map(tmeta.get("annotations"))
    )
    return ReplicaSpec(
        replica_type=replica_type,
        count=clamped(count, MAX_REPLICAS, "pods per replica"),
        flavor=flavor or GPU_ANY,
        mgpu=resources.mgpu,
        cpu_milli=resources.cpu_milli,
        memory_mib=resources.memory_mib,
    )


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _last_scale(meta: Mapping[str, Any]) -> tuple[datetime | None, str | None]:
    """The latest managedFields entry that set ``spec.replicas``: (its time, its manager)."""
    best: tuple[datetime | None, str | None] = (None, None)
    for entry in meta.get("managedFields") or ():
        if not isinstance(entry, Mapping):
            continue
        fields = entry.get("fieldsV1") or {}
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if not isinstance(spec, Mapping) or "f:replicas" not in spec:
            continue
        at = parse_time(entry.get("time"))
        if at is not None and (best[0] is None or at >= best[0]):
            manager = bounded_text(str(entry.get("manager") or ""), "field manager", MAX_NAME)
            best = (at, manager or None)
    return best


def workload_facts(obj: Mapping[str, Any]) -> WorkloadFacts:
    """A Deployment, StatefulSet or LeaderWorkerSet."""
    meta = object_meta(obj)
    kind = str(obj.get("kind") or "Deployment")
    namespace = str(meta.get("namespace") or "default")
    spec = obj.get("spec") or {}
    labels = dict(str_map(meta.get("labels")))
    annotations = dict(str_map(meta.get("annotations")))
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        template = lwt.get("workerTemplate") or lwt.get("leaderTemplate") or {}
        size = _int(lwt.get("size"), 1)
        replica = _replica(template, size, "group")
        revision = _revision(lwt)
    else:
        template = spec.get("template") or {}
        replica = _replica(template, 1, "replica")
        revision = _revision(template)
    tmeta = object_meta(template)
    all_labels = {**str_map(tmeta.get("labels")), **labels}
    all_annotations = {**str_map(tmeta.get("annotations")), **annotations}
    attribution = Attribution.read(
        all_labels, all_annotations, namespace, (template.get("spec") or {}).get("priority")
    )
    workload = all_labels.get(LABEL_WORKLOAD) or all_annotations.get(LABEL_WORKLOAD)
    spillover = all_annotations.get(ANNOTATION_SPILLOVER) or all_labels.get(ANNOTATION_SPILLOVER)
    owned = any(
        isinstance(ref, Mapping) and ref.get("controller")
        for ref in meta.get("ownerReferences") or ()
    )
    scaled_at, scaled_by = _last_scale(meta)
    return WorkloadFacts(
        uid=str(meta.get("uid") or ""),
        name=str(meta.get("name") or ""),
        namespace=namespace,
        kind=kind,
        workload="notebook" if workload == "notebook" else "service",
        resource_version=_int(meta.get("resourceVersion"), 0),
        generation=_int(meta.get("generation"), 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        deletion_at=parse_time(meta.get("deletionTimestamp")),
        attribution=attribution,
        replicas=clamped(_int(spec.get("replicas"), 1), MAX_REPLICAS, "replicas"),
        replica=replica,
        revision=revision,
        spillover="public" if spillover == "public" else "none",
        owned=owned,
        scaled_at=scaled_at,
        scaled_by=scaled_by,
    )


def workload_owner(
    meta: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[str | None, str, str] | None:
    """The workload a pod belongs to, as (uid if the pod names it, kind, name); None if the
    pod is no workload's replica."""
    lws = labels.get(LABEL_LWS_NAME)
    if lws:
        return None, "LeaderWorkerSet", lws
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "StatefulSet":
            return str(ref.get("uid") or "") or None, "StatefulSet", name
        if kind == "ReplicaSet":
            suffix = labels.get(POD_TEMPLATE_HASH)
            if suffix and name.endswith(f"-{suffix}"):
                return None, "Deployment", name[: -len(suffix) - 1]
            head, _, _ = name.rpartition("-")
            return None, "Deployment", head or name
    return None
