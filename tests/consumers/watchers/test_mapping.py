"""Objects → events through kubesim and the official client (checklist 12-14, 16) and the pure
mapping: labels / annotations, Kubeflow grouping, bare pods, quantities."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from consumers.watchers.api_values import parse_quantity
from consumers.watchers.event_factory import EventFactory
from consumers.watchers.facts import job_facts, pod_facts
from consumers.watchers.listwatch import JOBS, NODES, PODS, PYTORCHJOBS
from kubesim import BATCH_JOBS, KubeSim
from kubesim import PODS as SIM_PODS
from kubesim import PYTORCHJOBS as SIM_PYTORCHJOBS
from kubesim.objects import bind_pod, job_object, node_object, pod_object, terminate_pod
from kubesim.resources import NODES as SIM_NODES
from tests.support.watchers import (
    Recorder,
    bind,
    make_job,
    make_pod,
    settle,
    start_watcher,
    terminate,
)

RESOURCES = (NODES, JOBS, PODS)


def _at(seconds: int) -> str:
    return f"2026-11-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


def test_initial_state_is_state_not_creations(sim: KubeSim, recorder: Recorder) -> None:
    """A watch from rv 0 opens with synthetic ADDEDs: timestamps come from the objects."""
    job = make_job(sim, "j1")
    sim.advance(100)
    pod = make_pod(sim, job, "running", node="n1")  # bound at 100 s
    done = make_pod(sim, job, "done", node="n1")
    sim.advance(50)
    terminate(sim, done)  # finished at 150 s
    sim.advance(350)  # the watcher starts at 500 s
    watcher = start_watcher(sim, recorder, resources=(JOBS, PODS), start=False)
    for loop in watcher.loops.values():
        loop.rv = 0  # no LIST: the server's synthetic ADDED events are the initial state
    watcher.start()
    settle(watcher, sim)
    watcher.stop()
    assert all(loop.stats.lists == 0 for loop in watcher.loops.values())
    submitted = recorder.of("JobSubmitted")
    assert [e.occurred_at.isoformat() for e in submitted] == ["2026-11-01T00:00:00+00:00"]
    # each occupancy names its pod by uid and by name, and starts when the pod was bound
    started = {
        e.data["pod_uid"]: (e.data["pod_name"], e.data["started_at"])
        for e in recorder.of("OccupancyStarted")
    }
    assert started == {
        pod["metadata"]["uid"]: ("running", _at(100)),
        done["metadata"]["uid"]: ("done", _at(100)),
    }
    ended = recorder.of("OccupancyEnded")
    assert [(e.data["ended_at"], e.data["estimated"]) for e in ended] == [(_at(150), False)]
    assert recorder.of("JobRestarted") == []
    assert recorder.of("JobStarted")[0].occurred_at.isoformat() == "2026-11-01T00:01:40+00:00"


def test_an_occupancy_names_its_pod_at_both_ends(sim: KubeSim, recorder: Recorder) -> None:
    """The timeline names a pod by name when its occupancy ends, as when it starts."""
    from projections.jobs.timeline import summary

    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    job = make_job(sim, "j1")
    pod = make_pod(sim, job, "worker-0", node="n1")
    sim.advance(10)
    terminate(sim, pod)
    settle(watcher, sim)
    watcher.stop()
    (started,) = recorder.of("OccupancyStarted")
    (ended,) = recorder.of("OccupancyEnded")
    assert started.data["pod_name"] == ended.data["pod_name"] == "worker-0"
    text = summary("OccupancyEnded", ended.data, ended.data["job_uid"])
    assert text.startswith("pod worker-0 released at ")
    # an event recorded before the field existed still reads, by uid
    older = {k: v for k, v in ended.data.items() if k != "pod_name"}
    assert summary("OccupancyEnded", older, "j").startswith(f"pod {older['pod_uid']} released")


def test_same_name_recreation_yields_two_occupancies(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    job = make_job(sim, "j1")
    first = make_pod(sim, job, "worker-0", node="n1")
    sim.advance(10)
    terminate(sim, first, failed=True)
    sim.store.delete(SIM_PODS, "ns1", "worker-0")
    sim.advance(5)
    second = make_pod(sim, job, "worker-0", node="n2")  # same name, new uid
    settle(watcher, sim)
    watcher.stop()
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    started = recorder.of("OccupancyStarted")
    assert [e.data["occupancy_id"] for e in started] == [
        first["metadata"]["uid"],
        second["metadata"]["uid"],
    ]
    assert {e.data["job_uid"] for e in started} == {job["metadata"]["uid"]}
    assert [e.data["reason"] for e in recorder.of("OccupancyEnded")] == ["failed"]
    restarted = recorder.of("JobRestarted")
    assert len(restarted) == 1 and restarted[0].occurred_at.isoformat().endswith("00:00:15+00:00")
    assert len(recorder.of("JobStarted")) == 1  # the job started once


def test_deleted_event_uses_the_final_body(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    job = make_job(sim, "j1")
    make_pod(sim, job, "exact", node="n1")
    make_pod(sim, job, "unknown", node="n1")
    sim.advance(42)
    now = sim.clock.timestamp()
    # the only event after binding is DELETED, and its body carries the terminated state
    sim.store.delete(SIM_PODS, "ns1", "exact", final=lambda p: terminate_pod(p, now, failed=False))
    sim.advance(8)
    sim.store.delete(SIM_PODS, "ns1", "unknown")  # deleted while running, no time given
    settle(watcher, sim)
    watcher.stop()
    ended = {e.data["pod_uid"]: e.data for e in recorder.of("OccupancyEnded")}
    names = {e.data["pod_uid"]: e.data["pod_name"] for e in recorder.of("OccupancyStarted")}
    by_name = {names[uid]: data for uid, data in ended.items()}
    assert by_name["exact"]["ended_at"] == _at(42) and not by_name["exact"]["estimated"]
    assert by_name["exact"]["reason"] == "completed"
    assert by_name["unknown"]["reason"] == "deleted" and by_name["unknown"]["estimated"]
    assert by_name["unknown"]["ended_at"] == _at(50)  # the watcher's clock (virtual here)


def test_leaving_the_label_selector_is_out_of_scope(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(
        sim, recorder, resources=(PODS,), label_selector="dlc.ledger/workspace=ws-a"
    )
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0", node="n1")
    sim.advance(30)

    def move(p: dict[str, Any]) -> None:
        p["metadata"]["labels"]["dlc.ledger/workspace"] = "ws-b"

    sim.cluster.update(SIM_PODS, "ns1", "p0", move)
    settle(watcher, sim)
    watcher.stop()
    (ended,) = recorder.of("OccupancyEnded")
    assert ended.data["reason"] == "out-of-scope" and ended.data["estimated"]
    assert ended.data["ended_at"] == _at(30)
    assert recorder.of("JobDeleted") == []


def test_bare_pod_is_its_own_job_and_batch_job_outcome_comes_from_conditions(
    sim: KubeSim, recorder: Recorder
) -> None:
    watcher = start_watcher(sim, recorder, resources=RESOURCES)
    sim.cluster.create(
        SIM_NODES,
        node_object("n1", gpus=8, cpu_milli=96000, memory_mib=4096, gpu_model="A100-SXM4-80GB"),
    )
    bare = {
        "apiVersion": "v1",
        "kind": "None",
        "metadata": {"name": "lonely", "namespace": "ns2", "uid": "x"},
    }
    pod = pod_object("lonely", bare, sim.clock.timestamp())
    pod["metadata"]["ownerReferences"] = []
    pod["metadata"]["labels"] = {"dlc.ledger/billing-mode": "spot", "dlc.ledger/user": "ana"}
    created = sim.cluster.create(SIM_PODS, pod)
    bind(sim, created, "n1")
    sim.advance(20)
    terminate(sim, created)
    job = make_job(sim, "j1")
    make_pod(sim, job, "j1-abcde", node="n1")
    sim.advance(5)
    sim.cluster.finish_job("ns1", "j1", failed=True)
    settle(watcher, sim)
    watcher.stop()
    uid = created["metadata"]["uid"]
    bare_events = [e for e in recorder.events if e.stream == f"job/{uid}"]
    assert [e.type for e in bare_events] == [
        "JobSubmitted",
        "OccupancyStarted",
        "JobStarted",
        "OccupancyEnded",
        "JobSucceeded",
    ]
    submitted = bare_events[0].data
    assert submitted["kind"] == "Pod" and submitted["workspace"] == "ns2"  # default: namespace
    assert submitted["billing_mode"] == "spot" and submitted["user"] == "ana"
    job_events = [e.type for e in recorder.events if e.stream == f"job/{job['metadata']['uid']}"]
    # the job's and its pods' changes come on two watch streams: their relative order is free
    assert job_events[0] == "JobSubmitted"
    assert sorted(job_events) == ["JobFailed", "JobStarted", "JobSubmitted", "OccupancyStarted"]
    (node,) = recorder.of("NodeRegistered")
    assert node.data["flavor"] == "gpu/A100-SXM4-80GB" and node.data["gpus"] == 8
    assert node.stream == "node/n1"


def test_pytorchjob_pods_group_by_training_operator_labels(
    sim: KubeSim, recorder: Recorder
) -> None:
    watcher = start_watcher(sim, recorder, resources=(JOBS, PYTORCHJOBS, PODS))
    template = {
        "metadata": {"labels": {"dlc.ledger/workspace": "ws-nlp"}},
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "resources": {
                        "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}
                    },
                }
            ]
        },
    }
    ptj = sim.cluster.create(
        SIM_PYTORCHJOBS,
        {
            "metadata": {
                "name": "bert",
                "namespace": "nlp",
                "labels": {"dlc.ledger/quota": "q-nlp", "dlc.ledger/priority": "5"},
            },
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template},
                    "Worker": {"replicas": 3, "template": template},
                }
            },
        },
    )
    for rtype, index in (("master", 0), ("worker", 0), ("worker", 1)):
        pod = pod_object(f"bert-{rtype}-{index}", ptj, sim.clock.timestamp())
        pod["metadata"]["ownerReferences"] = []  # grouped by labels alone
        pod["metadata"]["labels"] = {
            "training.kubeflow.org/job-name": "bert",
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
            "dlc.ledger/workspace": "ws-nlp",
        }
        pod["spec"] = template["spec"]
        created = sim.cluster.create(SIM_PODS, pod)
        now = sim.clock.timestamp()
        sim.cluster.update(
            SIM_PODS, "nlp", created["metadata"]["name"], lambda p, now=now: bind_pod(p, "n1", now)
        )
    settle(watcher, sim)
    watcher.stop()
    uid = ptj["metadata"]["uid"]
    (submitted,) = recorder.of("JobSubmitted")
    data = submitted.data
    assert (data["kind"], data["framework"], data["quota"], data["priority"]) == (
        "PyTorchJob",
        "pytorch",
        "q-nlp",
        5,
    )
    assert [
        (r["replica_type"], r["count"], r["mgpu"], r["cpu_milli"], r["memory_mib"])
        for r in data["replicas"]
    ] == [("master", 1, 2000, 8000, 32768), ("worker", 3, 2000, 8000, 32768)]
    assert {e.data["job_uid"] for e in recorder.of("OccupancyStarted")} == {uid}
    assert len(recorder.of("JobStarted")) == 1 and recorder.of("JobRestarted") == []
    types = [e.type for e in recorder.events if e.stream == f"job/{uid}"]
    assert types[0] == "JobSubmitted"  # pods seen first waited for their job


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("2", "2"), ("16Gi", str(16 * 2**30)), ("1e3", "1000"), ("1.5k", "1500")],
)
def test_quantities(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


def test_event_ids_are_deterministic_and_keyed_by_uid() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "creationTimestamp": _at(0)},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _at(3)}
            ],
        },
    }
    factory = EventFactory("c1")
    facts = pod_facts(pod)
    a = factory.occupancy_started(facts, "j", facts.scheduled_at)  # type: ignore[arg-type]
    b = factory.occupancy_started(facts, "j", facts.created_at)  # type: ignore[arg-type]
    assert a.event_id == b.event_id and a.fact() == b.fact()  # observed_at is not the fact
    pod["metadata"]["uid"] = "u2"
    c = factory.occupancy_started(pod_facts(pod), "j", facts.created_at)  # type: ignore[arg-type]
    assert c.event_id != a.event_id
    assert job_facts({"kind": "Job", "metadata": {"uid": "x"}}).replicas[0].count == 1
    _ = BATCH_JOBS


def test_pod_started_before_its_job_was_seen_still_yields_job_started() -> None:
    """Pods and jobs come on separate streams; JobStarted must not depend on which is first."""
    from datetime import UTC, datetime

    from consumers.watchers.tracker import ClusterTracker

    now = datetime(2026, 11, 1, 1, tzinfo=UTC)
    tracker = ClusterTracker(EventFactory("c1"), lambda: now, orphan_grace=0)
    job = job_object(
        "j1", "ns1", labels={}, annotations={}, cpu_milli=1000, memory_mib=1024, gpus=1,
        priority=0,
    )  # fmt: skip
    job["metadata"]["uid"] = "job-uid-1"
    pod = bind_pod(pod_object("j1-0", job, _at(0)), "n1", _at(7))
    pod["metadata"]["uid"] = "pod-uid-1"
    first = tracker.observe(PODS.name, "ADDED", pod)
    assert [e.type for e in first] == ["OccupancyStarted"]  # no job known yet
    later = tracker.observe(JOBS.name, "ADDED", job)
    started = [e for e in later if e.type == "JobStarted"]
    assert [e.type for e in later] == ["JobSubmitted", "JobStarted"]
    assert started[0].occurred_at == datetime(2026, 11, 1, 0, 0, 7, tzinfo=UTC)
    assert started[0].stream == "job/job-uid-1"
    # seen again (a re-list): nothing new
    assert tracker.observe(JOBS.name, "MODIFIED", job) == []


def test_out_of_bounds_labels_and_annotations_fall_back_and_the_facts_are_still_recorded() -> None:
    """Tenant-set values beyond their bounds (a 16 KB user or flavor, mGPU 2**62, NUL, an
    int64 priority) are never published: the default applies, a warning is logged, and the
    pod's occupancy and its job are still recorded (the watcher does not retry forever)."""
    from consumers.watchers.tracker import ClusterTracker
    from ledger.bounds import MAX_CPU_MILLI, MAX_MEMORY_MIB, MAX_MGPU, MAX_REPLICAS

    now = datetime(2026, 11, 1, 1, tzinfo=UTC)
    tracker = ClusterTracker(EventFactory("c1"), lambda: now, orphan_grace=0)
    hostile = {
        "dlc.ledger/user": "u" * 16_000,
        "dlc.ledger/workspace": "w\x00",
        "dlc.ledger/quota": "q" * 64,
        "dlc.ledger/priority": str(2**62),
        "dlc.ledger/flavor": "f" * 16_000,
        "dlc.ledger/gpu-milli": str(2**62),
    }
    job = job_object(
        "j1", "ns1", labels={}, annotations=hostile, cpu_milli=1000, memory_mib=1024,
        gpus=1, priority=0,
    )  # fmt: skip
    job["metadata"]["uid"] = "job-uid-1"
    job["spec"]["parallelism"] = 2**40
    template = job["spec"]["template"]
    template["metadata"]["annotations"] = dict(hostile)
    container = template["spec"]["containers"][0]
    container["resources"]["requests"].update({"cpu": "1e9", "memory": "1Ei"})
    pod = bind_pod(pod_object("j1-0", job, _at(0)), "n1", _at(7))
    pod["metadata"]["uid"] = "pod-uid-1"
    events = tracker.observe(JOBS.name, "ADDED", job) + tracker.observe(PODS.name, "ADDED", pod)
    submitted = next(e for e in events if e.type == "JobSubmitted").data
    occupancy = next(e for e in events if e.type == "OccupancyStarted").data
    for data in (submitted, occupancy):
        assert data["user"] == "unknown" and data["workspace"] == "ns1"
        assert data["quota"] is None
    assert submitted["priority"] == 0
    replica = submitted["replicas"][0]
    assert replica["count"] == MAX_REPLICAS and replica["flavor"] == "gpu/any"
    assert replica["mgpu"] == 1000  # the GPU request, not the annotation
    assert (replica["cpu_milli"], replica["memory_mib"]) == (MAX_CPU_MILLI, MAX_MEMORY_MIB)
    assert occupancy["mgpu"] == 1000 <= MAX_MGPU and occupancy["flavor"] == "gpu/any"
