"""An occupancy's flavor is its node's GPU model when the pod names none (issue 24 item 4)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from consumers.watchers.event_factory import EventFactory
from consumers.watchers.listwatch import JOBS, NODES, PODS
from consumers.watchers.tracker import ClusterTracker
from kubesim import PODS as SIM_PODS
from kubesim import KubeSim
from kubesim.objects import bind_pod, job_object, node_object, pod_object
from kubesim.resources import NODES as SIM_NODES
from tests.support.watchers import Recorder, make_job, make_pod, settle, start_watcher

_NOW = datetime(2026, 11, 1, 1, tzinfo=UTC)


def test_a_pod_takes_its_nodes_gpu_model_unless_it_names_a_flavor(
    sim: KubeSim, recorder: Recorder
) -> None:
    sim.cluster.create(
        SIM_NODES, node_object("n-t4", gpus=4, cpu_milli=64000, memory_mib=262144, gpu_model="T4")
    )
    sim.cluster.create(SIM_NODES, node_object("n-plain", gpus=4, cpu_milli=64000, memory_mib=1024))
    watcher = start_watcher(sim, recorder)
    try:
        job = make_job(sim, "j1")
        make_pod(sim, job, "j1-0", node="n-t4")
        make_pod(sim, job, "j1-1", node="n-plain")
        named = make_job(sim, "j2")
        pod = make_pod(sim, named, "j2-0")
        meta = pod["metadata"]

        def annotate(p: dict[str, Any]) -> dict[str, Any]:
            p["metadata"].setdefault("annotations", {})["dlc.ledger/flavor"] = "gpu/A100"
            return bind_pod(p, "n-t4", sim.clock.timestamp())

        sim.cluster.update(SIM_PODS, meta["namespace"], meta["name"], annotate)
        settle(watcher, sim)
    finally:
        watcher.stop()
    flavors = {e.data["pod_name"]: e.data["flavor"] for e in recorder.of("OccupancyStarted")}
    assert flavors == {"j1-0": "gpu/T4", "j1-1": "gpu/any", "j2-0": "gpu/A100"}


def _objects() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    node = node_object("n-v100", gpus=8, cpu_milli=96000, memory_mib=1024, gpu_model="V100M32")
    node["metadata"]["uid"] = "node-uid-1"
    job = job_object(
        "j1", "ns1", labels={}, annotations={}, cpu_milli=1000, memory_mib=1024, gpus=1,
        priority=0,
    )  # fmt: skip
    job["metadata"]["uid"] = "job-uid-1"
    created, bound = "2026-11-01T00:00:00Z", "2026-11-01T00:00:07Z"
    pod = bind_pod(pod_object("j1-0", job, created), "n-v100", bound)
    pod["metadata"]["uid"] = "pod-uid-1"
    return node, job, pod


def test_the_flavor_does_not_depend_on_whether_the_node_or_the_pod_is_seen_first() -> None:
    """Nodes and pods come on separate watches: a pod bound to a node not seen yet waits
    for it (as a pod waits for its job), so both orders publish the same payload."""
    payloads = []
    for order in (("node", "job", "pod"), ("job", "pod", "node"), ("pod", "job", "node")):
        node, job, pod = _objects()
        tracker = ClusterTracker(EventFactory("c1"), lambda: _NOW, orphan_grace=5.0)
        seen = {"node": (NODES.name, node), "job": (JOBS.name, job), "pod": (PODS.name, pod)}
        out = []
        for name in order:
            resource, obj = seen[name]
            out += tracker.observe(resource, "ADDED", obj)
        started = [e for e in out if e.type == "OccupancyStarted"]
        assert len(started) == 1, order
        payloads.append(started[0].data)
    assert {p["flavor"] for p in payloads} == {"gpu/V100M32"}
    assert payloads[0] == payloads[1] == payloads[2]


def test_a_pod_whose_node_never_shows_up_occupies_gpu_any_after_the_grace() -> None:
    _, job, pod = _objects()
    clock = [0.0]
    tracker = ClusterTracker(
        EventFactory("c1"), lambda: _NOW, orphan_grace=5.0, monotonic=lambda: clock[0]
    )
    tracker.observe(JOBS.name, "ADDED", job)
    assert tracker.observe(PODS.name, "ADDED", pod) == []  # waits for node n-v100
    assert tracker.flush_orphans() == []
    clock[0] = 6.0
    started = [e for e in tracker.flush_orphans() if e.type == "OccupancyStarted"]
    assert [e.data["flavor"] for e in started] == ["gpu/any"]
