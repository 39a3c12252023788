"""The :class:`~consumers.dispatcher.actuator.Actuator` on Kubernetes, with the official
client: batch Jobs through ``spec.suspend`` (BatchV1Api), Kubeflow jobs through
``spec.runPolicy.suspend`` (CustomObjectsApi, kubeflow.org/v1), pods deleted through
CoreV1Api (marked ``dlc.ledger/preempted-by`` first, so the watcher ends their occupancy
``preempted``). A job or pod that is gone (404) needs nothing more: that is not an error.

A stop at the job's maximum run time sets the platform's own timeout,
``activeDeadlineSeconds`` (the Job's, a Kubeflow job's ``runPolicy``'s, a bare pod's): the
job has run that long, so its controller fails it at once (``DeadlineExceeded``), deleting
its pods, and the job keeps its record instead of being deleted.

A service's or notebook's replicas (docs/dispatch.md, "Services and notebooks") are pods
created with the ``dlc.ledger/admission`` scheduling gate: admitting a replica lifts the
gate of one of its workload's gated pods (a JSON patch of ``spec.schedulingGates``, which
Kubernetes allows to shrink only), preempting one deletes a released pod (marked
preempted; its controller makes it again, gated). A notebook refused at start is scaled to
no replica (AppsV1Api, or CustomObjectsApi for a LeaderWorkerSet), annotated
``dlc.ledger/refused`` with the reason; so is a running service or notebook the dispatcher
stops (``BudgetExhausted``, ``SubscriptionExpired``).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from consumers.dispatcher.actuator import ActuationError, JobRef
from consumers.watchers.labels import ANNOTATION_PREEMPTED, ANNOTATION_REFUSED, SCHEDULING_GATE
from consumers.watchers.workloads import workload_owner

__all__ = ["KUBEFLOW_PLURALS", "KubeActuator"]

log = logging.getLogger(__name__)

#: Kubeflow kinds → their plural in kubeflow.org/v1
KUBEFLOW_PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs"}

_MARK = {"metadata": {"annotations": {ANNOTATION_PREEMPTED: "dispatcher"}}}


class KubeActuator:
    """Suspends, resumes and deletes pods through one ``ApiClient``."""

    def __init__(self, api: client.ApiClient) -> None:
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def resume(self, job: JobRef) -> None:
        self._set_suspend(job, False)

    def suspend(self, job: JobRef) -> None:
        self._set_suspend(job, True)

    def stop(self, job: JobRef, max_run_seconds: int) -> None:
        deadline: dict[str, Any] = {"activeDeadlineSeconds": max_run_seconds}
        if job.kind == "Job":
            self._call(
                job,
                "patch spec.activeDeadlineSeconds",
                lambda: self.batch.patch_namespaced_job(
                    job.name, job.namespace, {"spec": deadline}
                ),
            )
        elif job.kind in KUBEFLOW_PLURALS:
            self._call(
                job,
                "patch spec.runPolicy.activeDeadlineSeconds",
                lambda: self.custom.patch_namespaced_custom_object(
                    "kubeflow.org",
                    "v1",
                    job.namespace,
                    KUBEFLOW_PLURALS[job.kind],
                    job.name,
                    {"spec": {"runPolicy": deadline}},
                ),
            )
        elif job.kind == "Pod":
            self._call(
                job,
                "patch the pod's spec.activeDeadlineSeconds",
                lambda: self.core.patch_namespaced_pod(job.name, job.namespace, {"spec": deadline}),
            )
        else:
            raise ActuationError(f"{job.kind} {job.namespace}/{job.name} cannot be stopped")

    def delete_pods(self, job: JobRef) -> None:
        pods = self._call(
            job, "list pods", lambda: self.core.list_namespaced_pod(job.namespace).items
        )
        for pod in pods or ():
            owners = pod.metadata.owner_references or ()
            if job.kind == "Pod":
                mine = pod.metadata.uid == job.uid
            else:
                mine = any(o.uid == job.uid for o in owners)
            if not mine:
                continue
            name = pod.metadata.name
            # marked first, so its occupancy ends "preempted"; deleted at once (the loop
            # suspends the job right after, so its controller makes no new one)
            self._call(
                job,
                f"mark pod {name} preempted",
                lambda name=name: self.core.patch_namespaced_pod(name, job.namespace, _MARK),
            )
            self._call(
                job,
                f"delete pod {name}",
                lambda name=name: self.core.delete_namespaced_pod(
                    name, job.namespace, grace_period_seconds=0
                ),
            )

    def release_replicas(self, workload: JobRef, pods: int, *, shrink: bool = False) -> None:
        listed = self._call(
            workload, "list pods", lambda: self.core.list_namespaced_pod(workload.namespace).items
        )
        gated: list[Any] = []
        released: list[Any] = []
        for pod in listed or ():
            meta = pod.metadata
            if meta.deletion_timestamp is not None or not _replica_of(pod, workload):
                continue
            gates = [g.name for g in (pod.spec.scheduling_gates or ())]
            (gated if SCHEDULING_GATE in gates else released).append(pod)
        gated.sort(key=lambda p: (p.metadata.creation_timestamp or 0, p.metadata.name))
        for pod in gated[: max(0, pods - len(released))]:
            name = pod.metadata.name
            rest = [
                {"name": g.name}
                for g in (pod.spec.scheduling_gates or ())
                if g.name != SCHEDULING_GATE
            ]
            body = [{"op": "replace", "path": "/spec/schedulingGates", "value": rest}]
            self._call(
                workload,
                f"lift the admission gate of pod {name}",
                lambda name=name, body=body: self.core.patch_namespaced_pod(
                    name, workload.namespace, body
                ),
            )
        if not shrink:
            return
        released.sort(key=lambda p: (p.metadata.creation_timestamp or 0, p.metadata.name))
        for pod in reversed(released[pods:]):
            name = pod.metadata.name
            self._call(
                workload,
                f"mark pod {name} preempted",
                lambda name=name: self.core.patch_namespaced_pod(name, workload.namespace, _MARK),
            )
            self._call(
                workload,
                f"delete pod {name}",
                lambda name=name: self.core.delete_namespaced_pod(
                    name, workload.namespace, grace_period_seconds=0
                ),
            )

    def refuse(self, workload: JobRef, reason: str) -> None:
        body = {"metadata": {"annotations": {ANNOTATION_REFUSED: reason}}, "spec": {"replicas": 0}}
        name, namespace = workload.name, workload.namespace
        if workload.kind == "Deployment":
            call: Any = lambda: self.apps.patch_namespaced_deployment(name, namespace, body)  # noqa: E731
        elif workload.kind == "StatefulSet":
            call = lambda: self.apps.patch_namespaced_stateful_set(name, namespace, body)  # noqa: E731
        elif workload.kind == "LeaderWorkerSet":
            call = lambda: self.custom.patch_namespaced_custom_object(  # noqa: E731
                "leaderworkerset.x-k8s.io", "v1", namespace, "leaderworkersets", name, body
            )
        else:
            raise ActuationError(f"{workload.kind} {namespace}/{name} is no workload to scale")
        self._call(workload, f"scale to 0 replicas ({reason})", call)

    def _set_suspend(self, job: JobRef, suspend: bool) -> None:
        if job.kind == "Job":
            body: dict[str, Any] = {"spec": {"suspend": suspend}}
            self._call(
                job,
                "patch spec.suspend",
                lambda: self.batch.patch_namespaced_job(job.name, job.namespace, body),
            )
        elif job.kind in KUBEFLOW_PLURALS:
            body = {"spec": {"runPolicy": {"suspend": suspend}}}
            self._call(
                job,
                "patch spec.runPolicy.suspend",
                lambda: self.custom.patch_namespaced_custom_object(
                    "kubeflow.org",
                    "v1",
                    job.namespace,
                    KUBEFLOW_PLURALS[job.kind],
                    job.name,
                    body,
                ),
            )
        elif suspend:
            # a bare pod cannot be suspended: stopping it is deleting it
            self.delete_pods(job)
        else:
            raise ActuationError(f"{job.kind} {job.namespace}/{job.name} cannot be resumed")

    @staticmethod
    def _call(job: JobRef, what: str, call: Any) -> Any:
        try:
            return call()
        except ApiException as exc:
            if exc.status == 404:
                log.info("%s %s/%s is gone: nothing to %s", job.kind, job.namespace, job.name, what)
                return None
            raise ActuationError(
                f"{what} of {job.kind} {job.namespace}/{job.name}: HTTP {exc.status} {exc.reason}",
                transient=(exc.status or 0) == 429 or (exc.status or 0) >= 500,
            ) from exc
        except (HTTPError, OSError) as exc:
            raise ActuationError(
                f"{what} of {job.kind} {job.namespace}/{job.name}: {exc}", transient=True
            ) from exc


def _replica_of(pod: Any, workload: JobRef) -> bool:
    """Whether ``pod`` is one of ``workload``'s replicas (the watcher's own rule)."""
    meta = pod.metadata
    refs = [
        {"kind": o.kind, "name": o.name, "uid": o.uid, "controller": o.controller}
        for o in meta.owner_references or ()
    ]
    owner = workload_owner({"ownerReferences": refs}, meta.labels or {})
    return owner is not None and owner[1:] == (workload.kind, workload.name)
