"""Builders for services and notebooks: Deployments, StatefulSets, LeaderWorkerSets and their
replica pods, shaped as their real controllers make them.

kubesim runs no Deployment controller: the trace driver and the tests create the replica pods
themselves, owned as a real cluster owns them (a Deployment's pod by a ReplicaSet named
``<deployment>-<pod-template-hash>``, a StatefulSet's by the StatefulSet, a LeaderWorkerSet's
labelled with its name), which is all the watcher reads (docs/workloads.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from kubesim.objects import _resources, owner_reference
from kubesim.resources import DEPLOYMENTS, LEADERWORKERSETS, PODS, STATEFULSETS

__all__ = [
    "LABEL_LWS_NAME",
    "LABEL_WORKLOAD",
    "deployment_object",
    "leaderworkerset_object",
    "replica_pod",
    "replica_requests",
    "statefulset_object",
    "template_hash",
]

LABEL_WORKLOAD = "dlc.ledger/workload"
LABEL_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"

Object = dict[str, Any]


def _template(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    *,
    cpu_milli: int,
    memory_mib: int,
    gpus: int,
    priority: int,
    image: str,
) -> Object:
    resources = _resources(cpu_milli, memory_mib, gpus)  # as a job's pod asks (objects.py)
    return {
        "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
        "spec": {
            "containers": [{"name": "main", "image": image, "resources": resources}],
            "restartPolicy": "Always",
            "priority": priority,
        },
    }


def _workload(
    res: Any,
    name: str,
    namespace: str,
    spec: Object,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> Object:
    return {
        "apiVersion": res.api_version,
        "kind": res.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "spec": spec,
        "status": {},
    }


def deployment_object(
    name: str,
    namespace: str,
    *,
    replicas: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    cpu_milli: int = 1000,
    memory_mib: int = 1024,
    gpus: int = 1,
    priority: int = 0,
    image: str = "registry.local/eas/server:1",
) -> Object:
    """An apps/v1 Deployment of ``replicas`` pods, its template labelled as the object."""
    selector = {"app": name}
    template = _template(
        {**labels, **selector},
        annotations or {},
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        gpus=gpus,
        priority=priority,
        image=image,
    )
    spec = {"replicas": replicas, "selector": {"matchLabels": selector}, "template": template}
    return _workload(DEPLOYMENTS, name, namespace, spec, labels, annotations or {})


def statefulset_object(
    name: str,
    namespace: str,
    *,
    replicas: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    cpu_milli: int = 1000,
    memory_mib: int = 1024,
    gpus: int = 1,
    priority: int = 0,
    image: str = "registry.local/eas/server:1",
) -> Object:
    """An apps/v1 StatefulSet (a notebook instance is one, labelled ``dlc.ledger/workload``)."""
    obj = deployment_object(
        name,
        namespace,
        replicas=replicas,
        labels=labels,
        annotations=annotations,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        gpus=gpus,
        priority=priority,
        image=image,
    )
    obj["apiVersion"], obj["kind"] = STATEFULSETS.api_version, STATEFULSETS.kind
    obj["spec"]["serviceName"] = name
    return obj


def leaderworkerset_object(
    name: str,
    namespace: str,
    *,
    replicas: int,
    size: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    cpu_milli: int = 1000,
    memory_mib: int = 1024,
    gpus: int = 1,
    priority: int = 0,
    image: str = "registry.local/eas/llm:1",
) -> Object:
    """A LeaderWorkerSet: ``replicas`` groups of ``size`` pods (multi-host inference)."""
    template = _template(
        labels,
        annotations or {},
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        gpus=gpus,
        priority=priority,
        image=image,
    )
    spec = {
        "replicas": replicas,
        "leaderWorkerTemplate": {"size": size, "workerTemplate": template},
    }
    return _workload(LEADERWORKERSETS, name, namespace, spec, labels, annotations or {})


def template_hash(workload: Mapping[str, Any]) -> str:
    """A stand-in for the ReplicaSet's ``pod-template-hash`` (any stable hash will do)."""
    text = json.dumps(workload["spec"].get("template") or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def replica_pod(workload: Mapping[str, Any], index: int, now: str, *, group_pod: int = 0) -> Object:
    """Replica ``index``'s pod (of a LeaderWorkerSet: pod ``group_pod`` of group ``index``),
    Pending, owned and labelled as the workload's controller would."""
    meta = workload["metadata"]
    kind, name = workload["kind"], meta["name"]
    spec = workload["spec"]
    if kind == LEADERWORKERSETS.kind:
        template = spec["leaderWorkerTemplate"]["workerTemplate"]
        pod_name = f"{name}-{index}" + (f"-{group_pod}" if group_pod else "")
        owner: Object = {
            "apiVersion": STATEFULSETS.api_version,
            "kind": STATEFULSETS.kind,
            "name": f"{name}-{index}" if group_pod else name,
            "uid": f"{meta['uid']}-sts-{index if group_pod else 0}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        extra = {LABEL_LWS_NAME: name, "leaderworkerset.sigs.k8s.io/group-index": str(index)}
    elif kind == DEPLOYMENTS.kind:
        template = spec["template"]
        digest = template_hash(workload)
        pod_name = f"{name}-{digest}-{index:05d}"
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"{name}-{digest}",
            "uid": f"{meta['uid']}-rs-{digest}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        extra = {"pod-template-hash": digest}
    else:
        template = spec["template"]
        pod_name = f"{name}-{index}"
        owner = owner_reference(workload)
        extra = {"statefulset.kubernetes.io/pod-name": pod_name}
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": PODS.api_version,
        "kind": PODS.kind,
        "metadata": {
            "name": pod_name,
            "namespace": meta["namespace"],
            "labels": {**(tmeta.get("labels") or {}), **extra},
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [owner],
        },
        "spec": dict(template["spec"]),
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": now,
                }
            ],
        },
    }


def replica_requests(pod: Object, *, cpu_milli: int, memory_mib: int, gpus: int) -> Object:
    """``pod`` (from :func:`replica_pod`) asking its own resources instead of its template's,
    as the replicas of one trace app do (a DLRM app's instances differ by role)."""
    resources = _resources(cpu_milli, memory_mib, gpus)
    spec = pod["spec"]
    spec["containers"] = [{**c, "resources": resources} for c in spec.get("containers") or ()]
    return pod
