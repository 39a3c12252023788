"""A service's rows under the dispatcher in a closed loop: a live row scales its
Deployment up and creates its replica pod held by the admission gate; released, the pod is
bound and runs the row's length, then goes and the Deployment scales down; a replica the
dispatcher deletes as preempted is made again, gated, and runs its full length again once
released; ``live_rows(keep_services=True)`` keeps a service's copies replicas of a service
of their own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from kubernetes import client

from kubesim import KubeSim
from kubesim.clock import DEFAULT_EPOCH
from kubesim.closed_loop import ClosedLoopDriver
from kubesim.objects import ANNOTATION_PREEMPTED, SCHEDULING_GATE
from kubesim.traces import Trace, TraceInstance, TraceNode, live_rows

NODES = (TraceNode("gpu-0", 8, 96_000, 786_432, "V100"),)
NS = "app-a"


def _row(
    name: str, created: int, scheduled: int | None, deleted: int | None, replica: int
) -> TraceInstance:
    return TraceInstance(
        job_name=name,
        source_name=name,
        namespace=NS,
        workspace=NS,
        billing_mode="public",
        user=NS,
        priority=500,
        cpu_milli=4000,
        memory_mib=8192,
        gpu_milli=1000,
        gpus=1,
        created=created,
        scheduled=scheduled,
        deleted=deleted,
        service=NS,
        replica=replica,
    )


ROWS = (
    _row("r0", 0, 0, 500, 0),  # history: bound at 0, ends at 500
    _row("r1", 100, 110, 160, 1),  # live: runs 50 s once released
    _row("r2", 120, None, 150, 2),  # live, never run by the trace: withdrawn at 150
)
OPEN_UNTIL = 100


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(bookmark_interval=0.05, timeout_scale=0.1) as server:
        yield server


@pytest.fixture
def core(sim: KubeSim) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=sim.url)))


def _replicas(sim: KubeSim) -> int:
    apps = client.AppsV1Api(client.ApiClient(client.Configuration(host=sim.url)))
    return int(apps.read_namespaced_deployment(NS, NS).spec.replicas)


def _pod(core: client.CoreV1Api, driver: ClosedLoopDriver, row: TraceInstance) -> client.V1Pod:
    return core.read_namespaced_pod(driver.services[(NS, NS)].pod_name(row), NS)


def _gone(core: client.CoreV1Api, driver: ClosedLoopDriver, row: TraceInstance) -> bool:
    try:
        _pod(core, driver, row)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def _gates(pod: client.V1Pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or ()]


def _release(core: client.CoreV1Api, pod: client.V1Pod) -> None:
    """What the dispatcher's release_replicas does: lift the admission gate."""
    body = [{"op": "replace", "path": "/spec/schedulingGates", "value": []}]
    core.patch_namespaced_pod(pod.metadata.name, NS, body)


def _preempt(core: client.CoreV1Api, pod: client.V1Pod) -> None:
    """What the dispatcher's preemption of a replica does: mark it, delete it at once."""
    mark = {"metadata": {"annotations": {ANNOTATION_PREEMPTED: "dispatcher"}}}
    core.patch_namespaced_pod(pod.metadata.name, NS, mark)
    core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)


def test_a_live_replica_waits_gated_runs_its_length_once_released_then_scales_down(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    r0, r1, r2 = ROWS
    driver = ClosedLoopDriver(
        sim, Trace("t", DEFAULT_EPOCH, NODES, ROWS, 500), end=500, open_until=OPEN_UNTIL
    )
    assert set(driver.runs) == {(NS, "r1"), (NS, "r2")}
    driver.play_history()
    assert _replicas(sim) == 1 and _pod(core, driver, r0).status.phase == "Running"

    driver.run_until(120)  # r1 (100) and r2 (120) scale up, their pods gated
    assert _replicas(sim) == 3
    for row in (r1, r2):
        pod = _pod(core, driver, row)
        assert _gates(pod) == [SCHEDULING_GATE] and not pod.spec.node_name
    assert driver.waiting() == [f"{NS}/r1", f"{NS}/r2"]
    driver.run_until(130)
    assert not _pod(core, driver, r1).spec.node_name  # nothing releases it by itself

    _release(core, _pod(core, driver, r1))  # the dispatcher admits r1 at 130
    pod = _pod(core, driver, r1)
    assert pod.status.phase == "Running" and pod.spec.node_name == "gpu-0"
    assert driver.runs[(NS, "r1")].starts == 1 and driver.waiting() == [f"{NS}/r2"]

    driver.run_until(150)  # r2 withdrawn, gated: its pod goes, one replica fewer
    assert _gone(core, driver, r2) and _replicas(sim) == 2
    assert driver.runs[(NS, "r2")].ended == "Withdrawn"
    driver.run_until(179)
    assert _pod(core, driver, r1).status.phase == "Running"
    driver.run_until(180)  # 50 s after its release (130), not the trace's 160
    assert _gone(core, driver, r1) and _replicas(sim) == 1
    run = driver.runs[(NS, "r1")]
    assert (run.ended, run.ended_at, run.preemptions) == ("Succeeded", 180, 0)
    assert not driver.finished  # r0, history, ends at 500
    driver.run_until(500)
    assert _gone(core, driver, r0) and _replicas(sim) == 0 and driver.finished


def test_a_preempted_replica_comes_back_gated_and_runs_its_length_again(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    r0, r1 = ROWS[0], ROWS[1]
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, (r0, r1), 500), end=500)
    # no history: every row is live, r0 too (its Deployment created at 0 with it)
    driver.run_until(0)
    assert _gates(_pod(core, driver, r0)) == [SCHEDULING_GATE] and _replicas(sim) == 1
    driver.run_until(100)
    _release(core, _pod(core, driver, r1))
    first = _pod(core, driver, r1)
    driver.run_until(120)
    _preempt(core, first)  # the dispatcher preempts r1 at 120
    assert _gone(core, driver, r1)
    driver.run_until(120)  # the ReplicaSet's new pod, at the same second, gated
    again = _pod(core, driver, r1)
    assert again.metadata.uid != first.metadata.uid and _gates(again) == [SCHEDULING_GATE]
    assert _replicas(sim) == 2 and driver.runs[(NS, "r1")].preemptions == 1
    driver.run_until(150)  # the first pod's run end (150) does nothing to the new pod
    assert _gates(_pod(core, driver, r1)) == [SCHEDULING_GATE]
    _release(core, again)  # admitted again at 150: its full 50 s again
    driver.run_until(199)
    assert _pod(core, driver, r1).status.phase == "Running"
    driver.run_until(200)
    assert _gone(core, driver, r1) and _replicas(sim) == 1
    run = driver.runs[(NS, "r1")]
    assert (run.ended, run.starts, run.preemptions) == ("Succeeded", 2, 1)


def test_a_service_scaled_to_none_by_the_dispatcher_is_never_scaled_below_none(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    r1 = ROWS[1]
    driver = ClosedLoopDriver(sim, Trace("t", DEFAULT_EPOCH, NODES, (r1,), 500), end=500)
    driver.run_until(100)
    _release(core, _pod(core, driver, r1))
    apps = client.AppsV1Api(core.api_client)
    apps.patch_namespaced_deployment(NS, NS, {"spec": {"replicas": 0}})  # a stopped service
    driver.run_until(150)  # its run ends: the pod goes, the replicas stay at 0
    assert _gone(core, driver, r1) and _replicas(sim) == 0
    assert driver.runs[(NS, "r1")].ended == "Succeeded"


def test_live_rows_keep_services_copies_a_service_s_replicas_into_a_service_of_its_own() -> None:
    rows = (*ROWS, replace(ROWS[2], job_name="j", service=None))
    trace = Trace("t", DEFAULT_EPOCH, NODES, rows, 500)
    live = live_rows(trace, (100, 200), keep_services=True)
    copies = {i.job_name: i for i in live.instances[len(trace.instances) :]}
    assert set(copies) == {"r1-live", "r2-live", "j-live"}
    assert (copies["r1-live"].service, copies["r1-live"].replica) == (f"{NS}-live", 1)
    assert copies["j-live"].service is None  # a Job stays a Job
    plain = live_rows(trace, (100, 200))
    assert all(i.service is None for i in plain.instances[len(trace.instances) :])
