"""Builders for the Kubernetes objects kubesim creates, and the status changes it applies.

Kept in one place so the trace driver, the job controller and the tests agree on the shape
the watcher reads: labels and annotations under `dlc.ledger/`, the `job-name` label and
ownerReferences, PodScheduled with the binding time, container running/terminated states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesim.resources import BATCH_JOBS, NODES, PODS

__all__ = [
    "ANNOTATION_GPU_MILLI",
    "ANNOTATION_PREEMPTED",
    "ANNOTATION_TRACE",
    "ANNOTATION_TRACE_NAME",
    "GPU_RESOURCE",
    "LABEL_BILLING_MODE",
    "LABEL_GPU_PRODUCT",
    "LABEL_JOB_NAME",
    "LABEL_PRIORITY",
    "LABEL_QUOTA",
    "LABEL_USER",
    "LABEL_WORKSPACE",
    "SCHEDULING_GATE",
    "bind_pod",
    "job_object",
    "mark_job_finished",
    "node_object",
    "owner_reference",
    "pod_object",
    "resource_group_of",
    "terminate_pod",
]

LABEL_WORKSPACE = "dlc.ledger/workspace"
LABEL_BILLING_MODE = "dlc.ledger/billing-mode"
LABEL_QUOTA = "dlc.ledger/quota"
LABEL_USER = "dlc.ledger/user"
LABEL_PRIORITY = "dlc.ledger/priority"
LABEL_JOB_NAME = "job-name"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
ANNOTATION_GPU_MILLI = "dlc.ledger/gpu-milli"
ANNOTATION_TRACE = "dlc.ledger/trace"
ANNOTATION_TRACE_NAME = "dlc.ledger/trace-name"
#: a job's declared maximum run time (seconds), which the dispatcher enforces
ANNOTATION_MAX_RUN = "dlc.ledger/max-run-seconds"
GPU_RESOURCE = "nvidia.com/gpu"
#: the scheduling gate a service's replica pod is created with; the dispatcher lifts it to
#: admit the replica (consumers.watchers.labels.SCHEDULING_GATE)
SCHEDULING_GATE = "dlc.ledger/admission"
#: the mark the dispatcher sets on a pod it deletes as preempted
ANNOTATION_PREEMPTED = "dlc.ledger/preempted-by"

Object = dict[str, Any]


def resource_group_of(gpu_model: str | None) -> str:
    """The resource group a trace node joins: one per GPU model (``gpu-g2``), ``cpu``
    for nodes without GPUs (label ``dlc.ledger/resource-group``)."""
    return f"gpu-{gpu_model.lower()}" if gpu_model else "cpu"


def node_object(
    name: str,
    *,
    gpus: int,
    cpu_milli: int,
    memory_mib: int,
    gpu_model: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Object:
    """A Ready node; capacity equals allocatable."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpu_model:
        all_labels[LABEL_GPU_PRODUCT] = gpu_model
    capacity = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": "110"}
    if gpus:
        capacity[GPU_RESOURCE] = str(gpus)
    return {
        "apiVersion": NODES.api_version,
        "kind": NODES.kind,
        "metadata": {"name": name, "labels": all_labels},
        "spec": {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _resources(cpu_milli: int, memory_mib: int, gpus: int) -> Object:
    requests = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi"}
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
    limits = {GPU_RESOURCE: str(gpus)} if gpus else {}
    result: Object = {"requests": requests}
    if limits:
        result["limits"] = limits
    return result


def _pod_spec(
    cpu_milli: int, memory_mib: int, gpus: int, priority: int, gpu_models: Sequence[str] = ()
) -> Object:
    spec: Object = {
        "containers": [
            {
                "name": "main",
                "image": "registry.local/dlc/trainer:latest",
                "resources": _resources(cpu_milli, memory_mib, gpus),
            }
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
        "priority": priority,
    }
    # the GPU models a pod may run on, as a real cluster says it: one model as a
    # nodeSelector (the pod then names its flavor), several as a required node affinity
    if len(gpu_models) == 1:
        spec["nodeSelector"] = {LABEL_GPU_PRODUCT: gpu_models[0]}
    elif gpu_models:
        term = {"key": LABEL_GPU_PRODUCT, "operator": "In", "values": list(gpu_models)}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    return spec


def job_object(
    name: str,
    namespace: str,
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    cpu_milli: int,
    memory_mib: int,
    gpus: int,
    priority: int,
    gpu_models: Sequence[str] = (),
) -> Object:
    """A batch/v1 Job with one pod (parallelism = completions = 1), not suspended;
    ``gpu_models``: the GPU models its pod may run on (empty: any)."""
    return {
        "apiVersion": BATCH_JOBS.api_version,
        "kind": BATCH_JOBS.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "suspend": False,
            "template": {
                "metadata": {
                    "labels": {**labels, LABEL_JOB_NAME: name},
                    "annotations": dict(annotations),
                },
                "spec": _pod_spec(cpu_milli, memory_mib, gpus, priority, gpu_models),
            },
        },
        "status": {},
    }


def owner_reference(owner: Mapping[str, Any]) -> Object:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_object(name: str, job: Mapping[str, Any], now: str) -> Object:
    """A Pending pod stamped from its owner's pod template (or a bare one), owned by it."""
    template = (job.get("spec") or {}).get("template") or {
        "metadata": {"labels": {LABEL_JOB_NAME: job["metadata"]["name"]}},
        "spec": _pod_spec(0, 0, 0, 0),
    }
    meta = template.get("metadata", {})
    return {
        "apiVersion": PODS.api_version,
        "kind": PODS.kind,
        "metadata": {
            "name": name,
            "namespace": job["metadata"]["namespace"],
            "labels": dict(meta.get("labels", {})),
            "annotations": dict(meta.get("annotations", {})),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": dict(template["spec"]),
        "status": {
            "phase": "Pending",
            "qosClass": "Burstable",
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


def _container_status(container: Mapping[str, Any], state: Object) -> Object:
    return {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": "",
        "ready": "running" in state,
        "restartCount": 0,
        "started": "running" in state,
        "state": state,
    }


def bind_pod(pod: Object, node: str, now: str) -> Object:
    """Scheduled and started on `node` at `now` (the trace's scheduled time)."""
    pod["spec"]["nodeName"] = node
    status = pod.setdefault("status", {})
    status["phase"] = "Running"
    status["startTime"] = now
    status["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
        {"type": "Ready", "status": "True", "lastTransitionTime": now},
    ]
    status["containerStatuses"] = [
        _container_status(c, {"running": {"startedAt": now}}) for c in pod["spec"]["containers"]
    ]
    return pod


def terminate_pod(pod: Object, now: str, *, failed: bool, exit_code: int | None = None) -> Object:
    """All containers terminated at `now`; phase Succeeded or Failed."""
    code = exit_code if exit_code is not None else (1 if failed else 0)
    status = pod.setdefault("status", {})
    status["phase"] = "Failed" if failed else "Succeeded"
    started = status.get("startTime", now)
    states = []
    for container in pod["spec"]["containers"]:
        terminated = {
            "exitCode": code,
            "reason": "Error" if failed else "Completed",
            "startedAt": started,
            "finishedAt": now,
        }
        states.append(_container_status(container, {"terminated": terminated}))
    status["containerStatuses"] = states
    for cond in status.get("conditions", []):
        if cond["type"] in ("Ready", "ContainersReady") and cond["status"] == "True":
            cond["status"] = "False"
            cond["reason"] = "PodCompleted"
            cond["lastTransitionTime"] = now
    return pod


def mark_job_finished(
    job: Object, now: str, *, failed: bool, reason: str = "BackoffLimitExceeded"
) -> Object:
    """The Job's ``Complete`` or ``Failed`` condition (``reason``: why it failed)."""
    status = job.setdefault("status", {})
    status["active"] = 0
    if failed:
        status["failed"] = 1
        kind = "Failed"
    else:
        status["succeeded"] = 1
        status["completionTime"] = now
        kind, reason = "Complete", "Completed"
    conditions = [
        c for c in status.get("conditions", []) if c["type"] not in ("Complete", "Failed")
    ]
    conditions.append(
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "lastTransitionTime": now,
            "lastProbeTime": now,
        }
    )
    status["conditions"] = conditions
    return job
