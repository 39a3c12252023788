"""A short trace replay: bind, terminate and delete happen at epoch + trace seconds; a
service's replicas scale its Deployment up before their pods exist and down after."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client, watch

from kubesim import BATCH_JOBS, DEPLOYMENTS, PODS, KubeSim
from kubesim.clock import DEFAULT_EPOCH
from kubesim.driver import TRACE_FIELD_MANAGER, TraceDriver, plan_services, pod_names
from kubesim.store import StoredEvent
from kubesim.traces import Trace, TraceInstance, TraceNode, load_dlrm, load_openb


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _collect(v1: client.CoreV1Api, rv: str, final_rv: int) -> list[dict[str, object]]:
    """Pod events from `rv` until a bookmark at `final_rv`, through the real client."""
    w = watch.Watch()
    events = []
    for e in w.stream(
        v1.list_pod_for_all_namespaces, resource_version=rv, allow_watch_bookmarks=True
    ):
        if e["type"] == "BOOKMARK":
            if int(e["raw_object"]["metadata"]["resourceVersion"]) >= final_rv:
                w.stop()
            continue
        events.append(e)
    return events


def test_openb_replay_timestamps(sim: KubeSim, v1: client.CoreV1Api) -> None:
    full = load_openb()
    picks = [
        next(i for i in full.instances if i.failed and i.scheduled and i.scheduled > i.created),
        next(i for i in full.instances if i.scheduled is None),
        next(i for i in full.instances if not i.failed and i.gpu_milli == 460),
        full.instances[0],
    ]
    nodes = tuple(n for n in full.nodes if n.gpus)[:30] + full.nodes[:10]
    trace = Trace("openb", full.epoch, nodes, tuple(picks), full.end)
    driver = TraceDriver(sim, trace, speed="max")
    assert sim.clock.seconds() == 0
    listed = v1.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in listed.items] == [full.instances[0].pod_name]
    assert len(v1.list_node().items) == 40
    driver.run()
    assert driver.finished and sim.clock.seconds() == full.end
    events = _collect(v1, listed.metadata.resource_version, sim.store.resource_version)
    epoch = full.epoch
    for inst in picks:
        mine = [e for e in events if e["object"].metadata.name == inst.pod_name]
        kinds = [e["type"] for e in mine]
        last = mine[-1]["object"]
        assert kinds[-1] == "DELETED"
        assert last.metadata.labels["dlc.ledger/workspace"] == inst.workspace
        assert last.metadata.labels["dlc.ledger/billing-mode"] == inst.billing_mode
        assert last.metadata.annotations["dlc.ledger/gpu-milli"] == str(inst.gpu_milli)
        assert last.metadata.owner_references[0].name == inst.job_name
        if inst.scheduled is None:
            assert last.spec.node_name is None and last.status.phase == "Pending"
            continue
        scheduled = epoch + timedelta(seconds=inst.scheduled)
        deleted = epoch + timedelta(seconds=inst.deleted or 0)
        cond = next(c for c in last.status.conditions if c.type == "PodScheduled")
        assert cond.status == "True" and cond.last_transition_time == scheduled
        term = last.status.container_statuses[0].state.terminated
        assert term.started_at == scheduled and term.finished_at == deleted
        assert last.status.phase == ("Failed" if inst.failed else "Succeeded")
        assert term.exit_code == (1 if inst.failed else 0)
        assert last.spec.node_name
    failed = picks[0]
    job = sim.store.get(BATCH_JOBS, failed.namespace, failed.job_name)
    assert [c["type"] for c in job["status"]["conditions"]] == ["Failed"]
    assert driver.overcommits == 0


def test_dlrm_instances_before_and_after_the_trace(sim: KubeSim, v1: client.CoreV1Api) -> None:
    full = load_dlrm()
    picks = (
        next(i for i in full.instances if i.pre_existing and i.deleted is None),
        next(i for i in full.instances if i.pre_existing and i.deleted is not None),
        next(i for i in full.instances if not i.pre_existing and i.deleted is None),
    )
    trace = Trace("dlrm", full.epoch, full.nodes[:3] + full.nodes[-3:], picks, full.end)
    names = [pod_names(trace)[(i.namespace, i.job_name)] for i in picks]
    driver = TraceDriver(sim, trace)
    first = {p.metadata.name: p for p in v1.list_pod_for_all_namespaces().items}
    running = first[names[0]]
    assert running.status.phase == "Running"
    assert (
        _iso(running.status.container_statuses[0].state.running.started_at)
        == "2026-11-01T00:00:00Z"
    )
    assert set(first) == {names[0], names[1]}
    assert sim.store.items(BATCH_JOBS) == []  # DLRM instances are replicas, not jobs
    driver.run()
    assert sim.clock.seconds() == full.end == 2677541
    still = {p.metadata.name for p in v1.list_pod_for_all_namespaces().items}
    assert still == {names[0], names[2]}
    late = sim.store.get(PODS, picks[2].namespace, names[2])
    started = late["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert started == _iso(full.epoch + timedelta(seconds=picks[2].scheduled or 0))


def test_a_dlrm_app_is_a_deployment_and_its_instances_its_replicas(sim: KubeSim) -> None:
    full = load_dlrm()
    rows = tuple(i for i in full.instances if i.workspace == "app_1")
    trace = Trace("dlrm", full.epoch, full.nodes[:3] + full.nodes[-3:], rows, full.end)
    plan = plan_services(trace)[("app-1", "app-1")]
    initial = sum(1 for i in rows if i.pre_existing)
    assert (plan.created, plan.replicas) == (0, initial) and initial > 0
    driver = TraceDriver(sim, trace)
    (deployment,) = sim.store.items(DEPLOYMENTS)
    assert deployment["metadata"]["name"] == "app-1" and deployment["spec"]["replicas"] == initial
    assert deployment["metadata"]["labels"]["dlc.ledger/workspace"] == "app_1"
    pods = sim.store.items(PODS)
    assert len(pods) == initial
    by_name = {p["metadata"]["name"]: p for p in pods}
    for inst in (i for i in rows if i.pre_existing):
        pod = by_name[plan.pod_name(inst)]
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet"
        assert owner["name"] == f"app-1-{plan.pod_template_hash}"
        assert pod["metadata"]["labels"]["pod-template-hash"] == plan.pod_template_hash
        assert pod["metadata"]["labels"]["dlc.ledger/workspace"] == "app_1"
        notes = pod["metadata"]["annotations"]
        assert notes["dlc.ledger/gpu-milli"] == str(inst.gpu_milli)
        assert notes["dlc.ledger/trace-name"] == inst.source_name
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert requests["cpu"] == f"{inst.cpu_milli}m"  # the instance's own, not the template's
        assert requests["memory"] == f"{inst.memory_mib}Mi"
        assert pod["spec"]["nodeName"] and pod["status"]["phase"] == "Running"
    driver.run()
    (deployment,) = sim.store.items(DEPLOYMENTS)
    assert deployment["spec"]["replicas"] == sum(1 for i in rows if i.deleted is None)
    assert len(sim.store.items(PODS)) == deployment["spec"]["replicas"]


def _row(
    name: str,
    created: int,
    deleted: int | None,
    *,
    scheduled: int | None = None,
    pre_existing: bool = False,
    replica: int = 0,
    gpu_milli: int = 1000,
) -> TraceInstance:
    return TraceInstance(
        job_name=name,
        source_name=name,
        namespace="app-x",
        workspace="app_x",
        billing_mode="public",
        user="app_x",
        priority=200,
        cpu_milli=4000,
        memory_mib=8192,
        gpu_milli=gpu_milli,
        gpus=1 if gpu_milli else 0,
        created=created,
        scheduled=created if scheduled is None else scheduled,
        deleted=deleted,
        pre_existing=pre_existing,
        service="app-x",
        replica=replica,
    )


def _tiny(*rows: TraceInstance) -> Trace:
    nodes = (TraceNode("gpu-0", 8, 64_000, 512_000, None),)
    return Trace("dlrm", DEFAULT_EPOCH, nodes, rows, 100)


def test_a_replica_scales_up_before_its_pod_and_down_after_it(sim: KubeSim) -> None:
    """Every creation: the scale, then the pod; every deletion: the pod, then the scale.
    So at no revision has the Deployment more live pods than it wants replicas, and each
    scale names the trace's field manager at its own second."""
    trace = _tiny(
        _row("a", 0, None, pre_existing=True, replica=0),
        _row("b", 10, 30, scheduled=12, replica=1),
        _row("c", 10, 10, replica=2),  # created, bound and deleted in one second
        _row("d", 30, 50, replica=3, gpu_milli=0),
    )
    seen: list[tuple[StoredEvent, str]] = []  # each change, and the virtual second it was made
    sim.store.listeners.append(lambda event: seen.append((event, sim.clock.timestamp())))
    driver = TraceDriver(sim, trace)
    driver.run()
    plan = plan_services(trace)[("app-x", "app-x")]
    names = {plan.pod_name(i): i.job_name for i in trace.instances}
    timeline: list[tuple[str, str, int]] = []  # (what, row or "", replicas)
    live: set[str] = set()
    desired = 0
    for event, stamp in seen:
        meta = event.obj["metadata"]
        if event.resource == DEPLOYMENTS.key:
            desired = event.obj["spec"]["replicas"]
            timeline.append((f"deployment {event.type}", "", desired))
            if event.type == "MODIFIED":
                (entry,) = meta["managedFields"]
                assert entry["manager"] == TRACE_FIELD_MANAGER
                assert entry["time"] == stamp
        elif event.resource == PODS.key:
            row = names[meta["name"]]
            if event.type == "ADDED":
                live.add(row)
                timeline.append(("pod ADDED", row, desired))
            elif event.type == "DELETED":
                live.discard(row)
                timeline.append(("pod DELETED", row, desired))
        assert len(live) <= desired, timeline
    changes = [(what, row, n) for what, row, n in timeline if what != "pod MODIFIED"]
    assert changes == [
        ("deployment ADDED", "", 1),
        ("pod ADDED", "a", 1),
        ("deployment MODIFIED", "", 2),
        ("pod ADDED", "b", 2),
        ("deployment MODIFIED", "", 3),
        ("pod ADDED", "c", 3),
        ("pod DELETED", "c", 3),
        ("deployment MODIFIED", "", 2),
        ("deployment MODIFIED", "", 3),
        ("pod ADDED", "d", 3),
        ("pod DELETED", "b", 3),
        ("deployment MODIFIED", "", 2),
        ("pod DELETED", "d", 2),
        ("deployment MODIFIED", "", 1),
    ]
    deployment = sim.store.get(DEPLOYMENTS, "app-x", "app-x")
    assert deployment["metadata"]["managedFields"][0]["time"] == "2026-11-01T00:00:50Z"
    assert deployment["metadata"]["generation"] == 7  # created, then six scales


def test_a_service_without_rows_before_the_trace_starts_at_its_first_row(sim: KubeSim) -> None:
    trace = _tiny(_row("a", 20, None, replica=0), _row("b", 20, 40, replica=1))
    driver = TraceDriver(sim, trace)
    assert sim.store.items(DEPLOYMENTS) == []
    driver.run_until(19)
    assert sim.store.items(DEPLOYMENTS) == []
    driver.run_until(20)
    (deployment,) = sim.store.items(DEPLOYMENTS)
    assert deployment["spec"]["replicas"] == 2 and deployment["metadata"]["generation"] == 1
    assert deployment["metadata"]["creationTimestamp"] == "2026-11-01T00:00:20Z"
    driver.run()
    assert sim.store.get(DEPLOYMENTS, "app-x", "app-x")["spec"]["replicas"] == 1


def test_real_time_speed_advances_the_clock(sim: KubeSim) -> None:
    full = load_openb()
    trace = Trace("openb", full.epoch, full.nodes[:5], (), 40)
    driver = TraceDriver(sim, trace, speed=400.0)  # 40 virtual seconds in ~0.1 s
    driver.start()
    assert driver.join(timeout=5)
    assert sim.clock.seconds() == 40
