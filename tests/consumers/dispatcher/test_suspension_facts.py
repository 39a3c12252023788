"""Suspension as facts: a job created suspended is queued, resumed is admitted, suspended
again after running is preempted (kubesim's job controller, the official client, the
real watcher; the jobs fold reads the result)."""

from __future__ import annotations

from datetime import datetime

from kubernetes import client

from consumers.watchers.listwatch import JOBS, PODS
from kubesim import BATCH_JOBS, KubeSim
from kubesim.objects import job_object
from kubesim.store import Object
from ledger.envelopes import Envelope
from projections.jobs.fold import Fact, fold_facts
from tests.support.watchers import Recorder, bind, settle, start_watcher


def _suspended_job(sim: KubeSim, name: str) -> Object:
    job = job_object(
        name,
        "ns1",
        labels={"dlc.ledger/workspace": "ws-a"},
        annotations={},
        cpu_milli=1000,
        memory_mib=512,
        gpus=1,
        priority=0,
    )
    job["spec"]["suspend"] = True
    return sim.cluster.create(BATCH_JOBS, job)


def _patch_suspend(sim: KubeSim, name: str, suspend: bool) -> None:
    api = client.BatchV1Api(client.ApiClient(client.Configuration(host=sim.url)))
    api.patch_namespaced_job(name, "ns1", {"spec": {"suspend": suspend}})


def _bind_new_pod(sim: KubeSim, job: Object) -> None:
    pods = [
        p for p in sim.cluster.owned_pods(job["metadata"]["uid"]) if not p["spec"].get("nodeName")
    ]
    assert len(pods) == 1
    bind(sim, pods[0], "n1")


def _fold(events: list[Envelope], uid: str) -> tuple[str, int, int, list[str]]:
    facts = [
        Fact(e.type, dict(e.data), e.occurred_at, n)
        for n, e in enumerate(events, start=1)
        if e.stream == f"job/{uid}"
    ]
    job = fold_facts(uid, None, facts)
    return job.status, job.preemptions, job.restarts, [s for s, _ in job.transitions]


def _when(e: Envelope) -> datetime:
    return e.occurred_at


def test_created_suspended_resumed_preempted_resumed(sim: KubeSim, recorder: Recorder) -> None:
    job = _suspended_job(sim, "train")
    uid = job["metadata"]["uid"]
    watcher = start_watcher(sim, recorder, resources=(JOBS, PODS))
    try:
        settle(watcher, sim)
        assert recorder.types() == ["JobSubmitted", "JobQueued"]
        assert recorder.of("JobQueued")[0].occurred_at == sim.clock.at(0)

        sim.advance(100)
        _patch_suspend(sim, "train", False)  # the dispatcher's resume
        _bind_new_pod(sim, job)
        settle(watcher, sim)
        admitted = recorder.of("JobAdmitted")
        assert [_when(e) for e in admitted] == [sim.clock.at(100)]

        sim.advance(100)
        _patch_suspend(sim, "train", True)  # preempted at 200: the pod has 30 s to go
        settle(watcher, sim)
        sim.advance(30)
        settle(watcher, sim)
        preempted = recorder.of("JobPreempted")
        assert [_when(e) for e in preempted] == [sim.clock.at(200)]
        ended = recorder.of("OccupancyEnded")
        assert [e.data["reason"] for e in ended] == ["deleted"]

        sim.advance(70)
        _patch_suspend(sim, "train", False)  # resumed at 300: a new pod, no restart
        _bind_new_pod(sim, job)
        settle(watcher, sim)
    finally:
        watcher.stop()
    assert [_when(e) for e in recorder.of("JobAdmitted")] == [sim.clock.at(100), sim.clock.at(300)]
    assert recorder.of("JobRestarted") == []
    assert len(recorder.of("OccupancyStarted")) == 2
    ids = [e.event_id for e in recorder.events]
    assert len(ids) == len(set(ids))

    status, preemptions, restarts, path = _fold(recorder.events, uid)
    assert (status, preemptions, restarts) == ("Running", 1, 0)
    assert path == [
        "Creating",
        "Queuing",
        "Admitted",
        "Running",
        "Preempted",
        "Admitted",
        "Running",
    ]

    # a watcher with no state relists the same cluster: the same facts, the same ids
    again = Recorder()
    fresh = start_watcher(sim, again, resources=(JOBS, PODS))
    try:
        settle(fresh, sim)
    finally:
        fresh.stop()
    lifecycle = {"JobQueued", "JobAdmitted", "JobPreempted"}
    seen = {e.event_id for e in again.events if e.type in lifecycle}
    assert seen and seen <= {e.event_id for e in recorder.events if e.type in lifecycle}


def test_a_running_job_suspended_is_preempted_not_queued(sim: KubeSim, recorder: Recorder) -> None:
    job = sim.cluster.create(
        BATCH_JOBS,
        job_object(
            "plain",
            "ns1",
            labels={"dlc.ledger/workspace": "ws-a"},
            annotations={},
            cpu_milli=1000,
            memory_mib=512,
            gpus=1,
            priority=0,
        ),
    )
    watcher = start_watcher(sim, recorder, resources=(JOBS, PODS))
    try:
        sim.advance(10)
        _patch_suspend(sim, "plain", False)  # no change: nothing
        from tests.support.watchers import make_pod

        make_pod(sim, job, "plain-0", node="n1")
        settle(watcher, sim)
        assert "JobQueued" not in recorder.types()
        sim.advance(10)
        _patch_suspend(sim, "plain", True)
        settle(watcher, sim)
    finally:
        watcher.stop()
    assert [_when(e) for e in recorder.of("JobPreempted")] == [sim.clock.at(20)]
    assert recorder.of("JobQueued") == [] and recorder.of("JobAdmitted") == []
