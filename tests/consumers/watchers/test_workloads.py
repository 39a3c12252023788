"""Services and notebooks through kubesim and the official client: a Deployment,
StatefulSet or LeaderWorkerSet is one workload (created, scaled, updated, deleted) and each
replica pod's occupancy is its workload's (issue 46, part 1; docs/workloads.md)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from consumers.projector import Projector
from consumers.watchers.listwatch import (
    DEPLOYMENTS,
    JOBS,
    LEADERWORKERSETS,
    NODES,
    PODS,
    STATEFULSETS,
)
from kubesim import DEPLOYMENTS as SIM_DEPLOYMENTS
from kubesim import LEADERWORKERSETS as SIM_LWS
from kubesim import PODS as SIM_PODS
from kubesim import STATEFULSETS as SIM_STATEFULSETS
from kubesim import KubeSim
from kubesim.objects import node_object
from kubesim.resources import NODES as SIM_NODES
from kubesim.services import (
    deployment_object,
    leaderworkerset_object,
    replica_pod,
    statefulset_object,
)
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.clis import CliCall
from tests.support.watchers import Recorder, bind, settle, start_watcher

RESOURCES = (NODES, JOBS, DEPLOYMENTS, STATEFULSETS, LEADERWORKERSETS, PODS)
TEAM = {"dlc.ledger/workspace": "ws-a", "dlc.ledger/quota": "team-a"}


def _apps(sim: KubeSim) -> client.AppsV1Api:
    return client.AppsV1Api(client.ApiClient(client.Configuration(host=sim.url)))


def _node(sim: KubeSim, name: str = "n1") -> None:
    sim.cluster.create(SIM_NODES, node_object(name, gpus=8, cpu_milli=64000, memory_mib=512000))


def _replica(sim: KubeSim, workload: dict[str, Any], index: int, **kw: Any) -> dict[str, Any]:
    pod = sim.cluster.create(SIM_PODS, replica_pod(workload, index, sim.clock.timestamp(), **kw))
    return bind(sim, pod, "n1")


def _uids(recorder: Recorder, type_: str) -> set[str]:
    return {e.data["job_uid"] for e in recorder.of(type_)}


def test_a_deployment_is_one_service_scaled_updated_and_deleted(
    sim: KubeSim, recorder: Recorder
) -> None:
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    _node(sim)
    svc = sim.cluster.create(
        SIM_DEPLOYMENTS,
        deployment_object(
            "ranker", "ns1", replicas=2, labels=TEAM, annotations={"dlc.ledger/spillover": "public"}
        ),
    )
    uid = svc["metadata"]["uid"]
    pods = [_replica(sim, svc, i) for i in range(2)]
    sim.advance(60)
    # a scale through the API, with the field manager the object records
    _apps(sim).patch_namespaced_deployment(
        "ranker",
        "ns1",
        {
            "spec": {"replicas": 3},
            "metadata": {
                "managedFields": [
                    {
                        "manager": "eas-autoscaler",
                        "operation": "Update",
                        "time": "2026-11-01T00:00:55Z",
                        "fieldsV1": {"f:spec": {"f:replicas": {}}},
                    }
                ]
            },
        },
    )
    settle(watcher, sim)
    pods.append(_replica(sim, sim.store.get(SIM_DEPLOYMENTS, "ns1", "ranker"), 2))
    sim.advance(30)
    # a rolling update: a new template, so new pods under a new ReplicaSet name
    _apps(sim).patch_namespaced_deployment(
        "ranker", "ns1", {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}}
    )
    settle(watcher, sim)
    updated = sim.store.get(SIM_DEPLOYMENTS, "ns1", "ranker")
    new_pod = _replica(sim, updated, 0)
    sim.cluster.delete(SIM_PODS, "ns1", pods[0]["metadata"]["name"], grace_seconds=0)
    sim.advance(30)
    _apps(sim).delete_namespaced_deployment("ranker", "ns1")
    for pod in [*pods[1:], new_pod]:
        sim.cluster.delete(SIM_PODS, "ns1", pod["metadata"]["name"], grace_seconds=0)
    settle(watcher, sim)
    watcher.stop()

    assert recorder.of("JobSubmitted") == []  # no replica is a job of its own
    (created,) = recorder.of("WorkloadCreated")
    assert created.stream == f"job/{uid}"
    assert created.data["workload"] == "service" and created.data["kind"] == "Deployment"
    assert created.data["replicas"] == 2 and created.data["spillover"] == "public"
    assert (created.data["workspace"], created.data["quota"]) == ("ws-a", "team-a")
    assert created.data["replica"]["mgpu"] == 1000
    (scaled,) = recorder.of("WorkloadScaled")
    assert (scaled.data["from_replicas"], scaled.data["to_replicas"]) == (2, 3)
    assert scaled.data["by"] == "eas-autoscaler"
    assert scaled.occurred_at.isoformat() == "2026-11-01T00:00:55+00:00"
    (update,) = recorder.of("WorkloadUpdated")
    assert update.data["revision"] != created.data["revision"]
    (deleted,) = recorder.of("WorkloadDeleted")
    assert deleted.occurred_at.isoformat() == "2026-11-01T00:02:00+00:00"
    # every replica, old revision and new, occupied for the service, and each occupancy ended
    assert _uids(recorder, "OccupancyStarted") == {uid}
    assert len(recorder.of("OccupancyStarted")) == 4
    assert len(recorder.of("OccupancyEnded")) == 4
    assert recorder.of("JobStarted") == [] and recorder.of("JobRestarted") == []


def test_a_statefulset_labelled_notebook_is_a_notebook(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    _node(sim)
    nb = sim.cluster.create(
        SIM_STATEFULSETS,
        statefulset_object(
            "dsw-alice", "ns1", replicas=1, labels={**TEAM, "dlc.ledger/workload": "notebook"}
        ),
    )
    _replica(sim, nb, 0)
    settle(watcher, sim)
    watcher.stop()
    (created,) = recorder.of("WorkloadCreated")
    assert created.data["workload"] == "notebook" and created.data["kind"] == "StatefulSet"
    assert _uids(recorder, "OccupancyStarted") == {nb["metadata"]["uid"]}


def test_a_leaderworkerset_is_one_service_of_groups(sim: KubeSim, recorder: Recorder) -> None:
    """Two groups of two pods; the StatefulSet the LeaderWorkerSet makes (owned by it) is no
    workload of its own."""
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    _node(sim)
    lws = sim.cluster.create(
        SIM_LWS, leaderworkerset_object("llm", "ns1", replicas=2, size=2, labels=TEAM)
    )
    owned = statefulset_object("llm", "ns1", replicas=2, labels=TEAM)
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": SIM_LWS.api_version,
            "kind": "LeaderWorkerSet",
            "name": "llm",
            "uid": lws["metadata"]["uid"],
            "controller": True,
        }
    ]
    sim.cluster.create(SIM_STATEFULSETS, owned)
    for group in range(2):
        for member in range(2):
            _replica(sim, lws, group, group_pod=member)
    settle(watcher, sim)
    watcher.stop()
    (created,) = recorder.of("WorkloadCreated")
    assert created.data["kind"] == "LeaderWorkerSet" and created.data["replicas"] == 2
    assert created.data["replica"]["count"] == 2  # pods per group
    assert _uids(recorder, "OccupancyStarted") == {lws["metadata"]["uid"]}
    assert len(recorder.of("OccupancyStarted")) == 4


def test_workload_kinds_not_watched_leave_their_pods_their_own_jobs(
    sim: KubeSim, recorder: Recorder
) -> None:
    """A watcher told to follow only jobs and pods accounts replicas as before workloads
    existed: each its own one-pod job."""
    watcher = start_watcher(sim, recorder, resources=(NODES, JOBS, PODS))
    _node(sim)
    svc = sim.cluster.create(
        SIM_DEPLOYMENTS, deployment_object("ranker", "ns1", replicas=2, labels=TEAM)
    )
    pods = [_replica(sim, svc, i) for i in range(2)]
    settle(watcher, sim)
    watcher.stop()
    assert recorder.of("WorkloadCreated") == []
    assert {e.data["kind"] for e in recorder.of("JobSubmitted")} == {"Pod"}
    assert _uids(recorder, "OccupancyStarted") == {p["metadata"]["uid"] for p in pods}


def test_a_restart_adds_nothing_and_a_service_gone_meanwhile_is_deleted(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    first = Recorder()
    watcher = start_watcher(sim, first, store=store, resources=RESOURCES)
    _node(sim)
    kept = sim.cluster.create(
        SIM_DEPLOYMENTS, deployment_object("kept", "ns1", replicas=1, labels=TEAM)
    )
    gone = sim.cluster.create(
        SIM_DEPLOYMENTS, deployment_object("gone", "ns1", replicas=1, labels=TEAM)
    )
    _replica(sim, kept, 0)
    settle(watcher, sim)
    watcher.stop()
    assert len(first.of("WorkloadCreated")) == 2
    # while no watcher runs: one service is deleted, the other scaled
    sim.store.delete(SIM_DEPLOYMENTS, "ns1", "gone")
    sim.cluster.update(
        SIM_DEPLOYMENTS, "ns1", "kept", lambda d: {**d, "spec": {**d["spec"], "replicas": 4}}
    )
    sim.compact()
    second = Recorder()
    watcher = start_watcher(sim, second, store=store, resources=RESOURCES)
    settle(watcher, sim)
    watcher.stop()
    assert second.of("WorkloadCreated") == [] and second.of("OccupancyStarted") == []
    (deleted,) = second.of("WorkloadDeleted")
    assert deleted.data["job_uid"] == gone["metadata"]["uid"]
    (scaled,) = second.of("WorkloadScaled")
    assert (scaled.data["from_replicas"], scaled.data["to_replicas"]) == (1, 4)
    assert scaled.data["job_uid"] == kept["metadata"]["uid"]


def test_a_service_reads_as_one_job_row_with_its_timeline(
    sim: KubeSim, recorder: Recorder, store: PostgresEventStore, cli: CliCall
) -> None:
    """Until the workload reads of issue 46 part 2, the jobs view folds a service as one row
    (kind Deployment, framework service), its scale and update on its timeline."""
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    _node(sim)
    svc = sim.cluster.create(
        SIM_DEPLOYMENTS, deployment_object("ranker", "ns1", replicas=1, labels=TEAM)
    )
    pod = _replica(sim, svc, 0)
    sim.advance(60)
    _apps(sim).patch_namespaced_deployment("ranker", "ns1", {"spec": {"replicas": 2}})
    settle(watcher, sim)
    sim.cluster.delete(SIM_PODS, "ns1", pod["metadata"]["name"], grace_seconds=0)
    _apps(sim).delete_namespaced_deployment("ranker", "ns1")
    settle(watcher, sim)
    watcher.stop()
    store.append(recorder.events)
    Projector(store, all_projections()).catch_up()
    (row,) = json.loads(cli("jobs", "list", "--format", "json"))
    assert (row["job_uid"], row["kind"], row["status"]) == (
        svc["metadata"]["uid"],
        "Deployment",
        "Stopped",
    )
    shown = cli("jobs", "show", svc["metadata"]["uid"])
    assert "created service Deployment ns1/ranker" in shown
    assert "scaled from 1 to 2 replicas" in shown
