"""410 handling, relist reconciliation, restarts and drift repair (checklist 3-6, 18)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import func, select

from consumers.watchers.listwatch import JOBS, NODES, PODS
from kubesim import BATCH_JOBS, KubeSim
from kubesim import PODS as SIM_PODS
from kubesim.objects import node_object
from kubesim.resources import NODES as SIM_NODES
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table
from tests.support.watchers import (
    Recorder,
    make_job,
    make_pod,
    settle,
    start_watcher,
    terminate,
    wait_for,
)

RESOURCES = (NODES, JOBS, PODS)


def _cluster_before_gap(sim: KubeSim, store: PostgresEventStore, recorder: Recorder) -> None:
    """Three running pods seen by a watcher that then stops (its resume point is saved)."""
    watcher = start_watcher(sim, recorder, store=store, resources=RESOURCES)
    job = make_job(sim, "j1")
    for name in ("gone", "finishes", "stays"):
        make_pod(sim, job, name, node="n1")
    sim.advance(60)
    settle(watcher, sim)
    watcher.stop()


@pytest.mark.parametrize("as_status", [False, True], ids=["error-event", "http-status"])
def test_410_relists_reconciles_and_rewatches(
    sim: KubeSim, store: PostgresEventStore, as_status: bool
) -> None:
    first = Recorder()
    _cluster_before_gap(sim, store, first)
    assert len(first.of("OccupancyStarted")) == 3
    # while no watcher runs: one pod vanishes, one completes, one appears; history is compacted
    sim.store.delete(SIM_PODS, "ns1", "gone")
    terminate(sim, sim.store.get(SIM_PODS, "ns1", "finishes"))
    job = sim.store.get(BATCH_JOBS, "ns1", "j1")
    make_pod(sim, job, "new", node="n2")
    sim.compact()
    sim.expired_watch_as_status = as_status
    second = Recorder()
    watcher = start_watcher(sim, second, store=store, resources=RESOURCES)
    settle(watcher, sim)
    pods = watcher.loops["pods"]
    assert pods.stats.expired == 1 and pods.stats.lists == 1
    ended = {e.data["pod_uid"]: e.data for e in second.of("OccupancyEnded")}
    by_name = {s.data["pod_name"]: s.data["pod_uid"] for s in first.of("OccupancyStarted")}
    vanished = ended[by_name["gone"]]
    assert vanished["reason"] == "vanished-during-relist" and vanished["estimated"] is True
    finished = ended[by_name["finishes"]]
    assert finished["reason"] == "completed" and finished["estimated"] is False
    assert finished["ended_at"] == "2026-11-01T00:01:00Z"
    assert by_name["stays"] not in ended
    assert [e.data["pod_name"] for e in second.of("OccupancyStarted")] == ["new"]
    # nothing published twice across the two runs, and nothing but these four facts
    ids = [e.event_id for e in first.events + second.events]
    assert len(ids) == len(set(ids))
    assert sorted(second.types()) == ["OccupancyEnded", "OccupancyEnded", "OccupancyStarted"]
    # the watch then continues from the relist's resourceVersion
    make_pod(sim, job, "later", node="n2")
    settle(watcher, sim)
    assert second.of("OccupancyStarted")[-1].data["pod_name"] == "later"
    watcher.stop()


def test_restart_with_cluster_unchanged_publishes_nothing(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    first = Recorder()
    _cluster_before_gap(sim, store, first)
    sim.requests.clear()
    second = Recorder()
    watcher = start_watcher(sim, second, store=store, resources=RESOURCES)
    sim.send_bookmarks()
    settle(watcher, sim)
    watcher.stop()
    assert second.events == []
    assert not [r for r in sim.requests if r.method == "GET" and "watch" not in r.path]


def test_restart_without_resume_point_relists_and_store_dedupes(
    sim: KubeSim, store: PostgresEventStore
) -> None:
    """Even a watcher that lost its state republishes only events with the same ids."""
    first = Recorder()
    _cluster_before_gap(sim, store, first)
    second = Recorder()
    watcher = start_watcher(sim, second, resources=RESOURCES)  # no store: no resume point
    settle(watcher, sim)
    watcher.stop()
    assert {e.event_id for e in second.events} <= {e.event_id for e in first.events}
    # the same facts, byte for byte (what the store compares), so every copy is a no-op
    firsts = {e.event_id: e.fact() for e in first.events}
    assert all(firsts[e.event_id] == e.fact() for e in second.events)


def test_periodic_relist_repairs_missing_occupancy(sim: KubeSim, store: PostgresEventStore) -> None:
    """A lost OccupancyStarted (never reached the store) is republished by the resync."""
    dropped: list[Envelope] = []

    def lossy_append(events: Sequence[Envelope]) -> None:
        kept = []
        for event in events:
            if event.type == "OccupancyStarted" and not dropped:
                dropped.append(event)
                continue
            kept.append(event)
        store.append(kept)

    # the node exists (a pod bound to a node not seen yet waits for it: docs/watchers.md)
    sim.cluster.create(SIM_NODES, node_object("n1", gpus=8, cpu_milli=64000, memory_mib=1024))
    watcher = start_watcher(sim, lossy_append, store=store, resources=RESOURCES, resync_seconds=0.5)
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0", node="n1")
    make_pod(sim, job, "p1", node="n1")
    settle(watcher, sim)
    assert len(dropped) == 1

    def stored(event_id: object) -> bool:
        with store.engine.connect() as conn:
            query = select(func.count()).where(events_table.c.event_id == event_id)
            return bool(conn.execute(query).scalar())

    assert not stored(dropped[0].event_id)
    wait_for(lambda: stored(dropped[0].event_id), timeout=10, what="drift repair")
    assert watcher.stats.repaired == 1
    watcher.stop()
