"""PATCH (suspend, labels), POST, graceful DELETE and the Kubeflow custom resources."""

from __future__ import annotations

import pytest
from kubernetes import client, watch

from kubesim import PODS, KubeSim
from tests.support.kube import make_job, make_pod


def _events(v1: client.CoreV1Api, rv: str) -> list[tuple[str, str, str | None]]:
    """(type, name, phase) of every pod event after `rv`."""
    found = []
    for e in watch.Watch().stream(
        v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1
    ):
        found.append((e["type"], e["object"].metadata.name, e["object"].status.phase))
    return found


def test_graceful_delete_waits_for_virtual_grace_period(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0", node="n1")
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    sim.advance(100)
    returned = v1.delete_namespaced_pod("p0", "ns1", grace_period_seconds=10)
    assert returned.metadata.deletion_timestamp.isoformat() == "2026-11-01T00:01:50+00:00"
    sim.advance(9)
    assert v1.read_namespaced_pod("p0", "ns1").metadata.deletion_grace_period_seconds == 10
    sim.advance(1)
    with pytest.raises(client.ApiException) as info:
        v1.read_namespaced_pod("p0", "ns1")
    assert info.value.status == 404
    events = _events(v1, rv)
    assert events == [
        ("MODIFIED", "p0", "Running"),
        ("MODIFIED", "p0", "Failed"),
        ("DELETED", "p0", "Failed"),
    ]
    # the DELETED body carries the terminated container state
    last = list(
        watch.Watch().stream(v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1)
    )[-1]
    term = last["object"].status.container_statuses[0].state.terminated
    assert term.exit_code == 143 and term.finished_at.isoformat() == "2026-11-01T00:01:50+00:00"


def test_delete_with_zero_grace_or_unbound_is_immediate(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "bound", node="n1")
    make_pod(sim, job, "pending")
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    v1.delete_namespaced_pod("bound", "ns1", grace_period_seconds=0)
    v1.delete_namespaced_pod("pending", "ns1")
    assert v1.list_pod_for_all_namespaces().items == []
    assert [e[0] for e in _events(v1, rv)] == ["DELETED", "DELETED"]


def test_patch_job_suspend_stops_and_resume_restarts_pods(
    sim: KubeSim, api: client.ApiClient
) -> None:
    v1 = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    job = make_job(sim, "j1")
    make_pod(sim, job, "j1-0", node="n1")
    patched = batch.patch_namespaced_job(
        "j1", "ns1", {"spec": {"suspend": True}, "metadata": {"labels": {"x": "y"}}}
    )
    assert patched.spec.suspend is True
    assert patched.metadata.labels == {"dlc.ledger/workspace": "ws-a", "x": "y"}
    assert {c.type: c.status for c in patched.status.conditions} == {"Suspended": "True"}
    pod = v1.read_namespaced_pod("j1-0", "ns1")
    assert pod.metadata.deletion_timestamp is not None  # graceful, 30 s by default
    sim.advance(30)
    assert v1.list_namespaced_pod("ns1").items == []
    resumed = batch.patch_namespaced_job("j1", "ns1", {"spec": {"suspend": False}})
    assert resumed.status.active == 1
    pods = v1.list_namespaced_pod("ns1", label_selector="job-name=j1").items
    assert (
        len(pods) == 1
        and pods[0].metadata.name.startswith("j1-")
        and pods[0].status.phase == "Pending"
    )
    # a JSON patch (list body) works too, and a no-op patch does not bump the revision
    rv = sim.store.resource_version
    batch.patch_namespaced_job(
        "j1", "ns1", [{"op": "replace", "path": "/spec/suspend", "value": False}]
    )
    assert sim.store.resource_version == rv


def test_patch_conflict_and_not_found(sim: KubeSim, v1: client.CoreV1Api) -> None:
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0")
    with pytest.raises(client.ApiException) as info:
        v1.patch_namespaced_pod(
            "p0", "ns1", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}}
        )
    assert info.value.status == 409
    with pytest.raises(client.ApiException) as info:
        v1.patch_namespaced_pod("nope", "ns1", {"metadata": {"labels": {"a": "b"}}})
    assert info.value.status == 404
    removed = v1.patch_namespaced_pod("p0", "ns1", {"metadata": {"labels": {"job-name": None}}})
    assert removed.metadata.labels == {"dlc.ledger/workspace": "ws-a"}


def test_create_pod_and_delete_job_with_background_propagation(
    sim: KubeSim, api: client.ApiClient
) -> None:
    v1 = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    job = make_job(sim, "j1")
    body = {
        "metadata": {
            "name": "made",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "j1",
                    "uid": job["metadata"]["uid"],
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    created = v1.create_namespaced_pod("ns1", body)
    assert created.metadata.namespace == "ns1" and created.metadata.uid
    with pytest.raises(client.ApiException) as info:
        v1.create_namespaced_pod("ns1", body)
    assert info.value.status == 409
    batch.delete_namespaced_job("j1", "ns1", propagation_policy="Background")
    assert batch.list_job_for_all_namespaces().items == []
    assert v1.list_pod_for_all_namespaces().items == []


def test_pytorchjob_custom_objects(sim: KubeSim, api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "labels": {"dlc.ledger/workspace": "ws-a"}},
        "spec": {
            "runPolicy": {"suspend": False},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}},
        },
    }
    co.create_namespaced_custom_object("kubeflow.org", "v1", "ns1", "pytorchjobs", body)
    co.create_namespaced_custom_object(
        "kubeflow.org", "v1", "ns1", "tfjobs", {**body, "kind": "TFJob"}
    )
    listed = co.list_cluster_custom_object("kubeflow.org", "v1", "pytorchjobs")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["train"]
    job = co.get_namespaced_custom_object("kubeflow.org", "v1", "ns1", "pytorchjobs", "train")
    make_pod(sim, job, "train-master-0", node="n1")
    patched = co.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "ns1",
        "pytorchjobs",
        "train",
        {"spec": {"runPolicy": {"suspend": True}}},
    )
    assert patched["spec"]["runPolicy"]["suspend"] is True
    assert patched["spec"]["pytorchReplicaSpecs"] == {"Master": {"replicas": 1}}
    assert sim.store.get(PODS, "ns1", "train-master-0")["metadata"]["deletionTimestamp"]
    rv = co.list_namespaced_custom_object("kubeflow.org", "v1", "ns1", "pytorchjobs")["metadata"][
        "resourceVersion"
    ]
    co.delete_namespaced_custom_object("kubeflow.org", "v1", "ns1", "pytorchjobs", "train")
    events = list(
        watch.Watch().stream(
            co.list_cluster_custom_object,
            "kubeflow.org",
            "v1",
            "pytorchjobs",
            resource_version=rv,
            timeout_seconds=1,
        )
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", "train")]
