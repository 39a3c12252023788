"""A short trace replay: bind, terminate and delete happen at epoch + trace seconds."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client, watch

from kubesim import BATCH_JOBS, PODS, KubeSim
from kubesim.driver import TraceDriver
from kubesim.traces import Trace, load_dlrm, load_openb


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
    driver = TraceDriver(sim, trace)
    first = {p.metadata.name: p for p in v1.list_pod_for_all_namespaces().items}
    running = first[picks[0].pod_name]
    assert running.status.phase == "Running"
    assert (
        _iso(running.status.container_statuses[0].state.running.started_at)
        == "2026-11-01T00:00:00Z"
    )
    assert set(first) == {picks[0].pod_name, picks[1].pod_name}
    driver.run()
    assert sim.clock.seconds() == full.end == 2677541
    still = {p.metadata.name for p in v1.list_pod_for_all_namespaces().items}
    assert still == {picks[0].pod_name, picks[2].pod_name}
    late = sim.store.get(PODS, picks[2].namespace, picks[2].pod_name)
    started = late["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert started == _iso(full.epoch + timedelta(seconds=picks[2].scheduled or 0))


def test_real_time_speed_advances_the_clock(sim: KubeSim) -> None:
    full = load_openb()
    trace = Trace("openb", full.epoch, full.nodes[:5], (), 40)
    driver = TraceDriver(sim, trace, speed=400.0)  # 40 virtual seconds in ~0.1 s
    driver.start()
    assert driver.join(timeout=5)
    assert sim.clock.seconds() == 40
