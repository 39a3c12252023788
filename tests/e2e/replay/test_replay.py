"""Trace replays end to end: kubesim → watchers → real Tansu → ingest → PostgreSQL → projections.

The openb trace (Alibaba PAI, alibaba/clusterdata, CC BY 4.0) replays in full and the store must
hold exactly one OccupancyStarted per scheduled pod and one OccupancyEnded per deleted scheduled
pod, at epoch + the trace's seconds; DLRM rows (replicas of their app's service) without
creation start at the epoch and rows without deletion stay open; a second run adds nothing;
a watcher killed mid-replay and restarted loses and duplicates nothing.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sqlalchemy import func, select

from consumers.kafka_settings import DEFAULT_PARTITIONS
from consumers.producer import EventPublisher
from consumers.watchers.listwatch import WatchSettings
from consumers.watchers.runner import Watcher
from dlc_ledger.wiring.replay import load_replay_trace, run_replay
from dlc_ledger.wiring.replay.database import replay_topic
from dlc_ledger.wiring.replay.pipeline import IngestThread
from kubesim import KubeSim
from kubesim.driver import TraceDriver, pod_names
from kubesim.traces import Trace
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import dead_letters
from ledger.store.schema import events as events_table
from projections.inventory.occupancy import occupancy
from projections.jobs import FINAL_STATUSES, job_state


def _occupancies(store: PostgresEventStore, source: str) -> dict[str, dict[str, Any]]:
    """pod name -> {"started": ts, "ended": ts | None, "count": (starts, ends)}."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(events_table.c.type, events_table.c.data).where(
                events_table.c.source == source,
                events_table.c.type.in_(["OccupancyStarted", "OccupancyEnded"]),
            )
        ).all()
    names: dict[str, str] = {}
    out: dict[str, dict[str, Any]] = {}
    for type_, data in rows:
        if type_ == "OccupancyStarted":
            names[data["occupancy_id"]] = data["pod_name"]
            entry = out.setdefault(data["pod_name"], {"started": [], "ended": []})
            entry["started"].append(data["started_at"])
    for type_, data in rows:
        if type_ == "OccupancyEnded":
            out[names[data["occupancy_id"]]]["ended"].append(data["ended_at"])
    return out


def _iso(epoch: datetime, seconds: int) -> str:
    return (epoch + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _check_against_trace(store: PostgresEventStore, trace: Trace, source: str) -> None:
    occ = _occupancies(store, source)
    names = pod_names(trace)
    scheduled = [i for i in trace.instances if i.scheduled is not None]
    # none for never-scheduled pods
    assert set(occ) == {names[(i.namespace, i.job_name)] for i in scheduled}
    for inst in scheduled:
        name = names[(inst.namespace, inst.job_name)]
        entry = occ[name]
        assert entry["started"] == [_iso(trace.epoch, inst.scheduled or 0)], name
        expected_end = [] if inst.deleted is None else [_iso(trace.epoch, inst.deleted)]
        assert entry["ended"] == expected_end, name


def _check_flavors(store: PostgresEventStore, trace: Trace, source: str) -> dict[str, int]:
    """Every occupancy's flavor is the GPU model of the node it was bound to (the trace's
    node list), ``gpu/any`` on a node without one; returns occupancies per flavor."""
    models = {n.name: n.gpu_model for n in trace.nodes}
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(events_table.c.data["node"].astext, events_table.c.data["flavor"].astext).where(
                events_table.c.source == source, events_table.c.type == "OccupancyStarted"
            )
        ).all()
    counts: dict[str, int] = {}
    for node, flavor in rows:
        model = models[node]
        assert flavor == (f"gpu/{model}" if model else "gpu/any"), (node, flavor)
        counts[flavor] = counts.get(flavor, 0) + 1
    return counts


def _dead_letters(store: PostgresEventStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(dead_letters)).scalar() or 0)


def _check_jobs_against_trace(store: PostgresEventStore, trace: Trace) -> None:
    """Every scheduled job entered Running at its scheduled time, and ran exactly as long
    as it occupied resources, whatever order its facts were stored in."""
    with store.engine.connect() as conn:
        jobs = {
            row.name: row
            for row in conn.execute(
                select(
                    job_state.c.name,
                    job_state.c.entered,
                    job_state.c.running_us,
                    job_state.c.status,
                )
            )
        }
    wrong: list[str] = []
    for inst in trace.instances:
        if inst.scheduled is None:
            continue
        job = jobs[inst.job_name]
        if job.entered.get("Running") != _iso(trace.epoch, inst.scheduled):
            wrong.append(f"{inst.job_name}: Running entered {job.entered.get('Running')}")
        elif inst.deleted is not None and (
            job.running_us != (inst.deleted - inst.scheduled) * 1_000_000
            or job.status not in FINAL_STATUSES
        ):
            wrong.append(f"{inst.job_name}: {job.status}, ran {job.running_us} us")
    assert not wrong, f"{len(wrong)} jobs disagree with the trace, e.g. {wrong[:5]}"


@pytest.mark.parametrize("partitions", [1, 4, 16])
def test_full_openb_replay_matches_the_trace(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path, partitions: int
) -> None:
    summary = run_replay(
        "openb",
        "openb",
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
        partitions=partitions,
    )
    trace = load_replay_trace("openb", "openb")
    assert summary.ok and summary.dead_letters == 0 and summary.projected
    assert summary.expected_started == 7255 == summary.occupancies_started
    assert summary.occupancies_ended == summary.expected_ended
    assert summary.virtual_seconds == trace.end
    _check_against_trace(store, trace, "kube-watcher/replay-openb")
    flavors = _check_flavors(store, trace, "kube-watcher/replay-openb")
    # GPU pods land on GPU nodes, each of which names its model; CPU pods on CPU nodes
    gpu_pods = sum(1 for i in trace.instances if i.scheduled is not None and i.gpu_milli)
    assert sum(n for f, n in flavors.items() if f != "gpu/any") == gpu_pods
    with store.engine.connect() as conn:  # the projections saw it too
        open_rows = conn.execute(select(func.count()).select_from(occupancy)).scalar()
    assert open_rows == 7255
    _check_jobs_against_trace(store, trace)


def test_dlrm_slice_open_ends_and_pre_existing_rows(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    full = load_replay_trace("dlrm", "dlrm")
    # a slice with rows that existed before the trace and rows still running at its end
    picks = [i for i in full.instances if i.pre_existing][:40]
    picks += [i for i in full.instances if not i.pre_existing and i.deleted is None][:40]
    picks += [i for i in full.instances if not i.pre_existing and i.deleted is not None][:40]
    trace = Trace("dlrm", full.epoch, full.nodes, tuple(picks), full.end)
    summary = _run(trace, store, bootstrap, tmp_path)
    assert summary["dead_letters"] == 0
    _check_against_trace(store, trace, "kube-watcher/test-dlrm")
    occ = _occupancies(store, "kube-watcher/test-dlrm")
    names = pod_names(trace)
    for inst in picks[:40]:  # start at the epoch
        assert occ[names[(inst.namespace, inst.job_name)]]["started"] == [_iso(full.epoch, 0)]
    # still open at the end
    assert all(occ[names[(i.namespace, i.job_name)]]["ended"] == [] for i in picks[40:80])


def test_second_replay_adds_nothing_and_fresh_starts_empty(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path
) -> None:
    first = run_replay(
        "openb",
        "openb",
        limit=300,
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
        project=False,
    )
    assert first.ok and first.events_stored > 0
    again = run_replay(
        "openb",
        "openb",
        limit=300,
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
        project=False,
    )
    assert again.ok and again.events_stored == 0 and again.dead_letters == 0
    assert again.published > 0 and again.topic == first.topic  # relisted, deduplicated
    fresh = run_replay(
        "openb",
        "openb",
        limit=100,
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
        project=False,
        fresh=True,
    )
    assert fresh.ok and fresh.topic != first.topic
    assert fresh.events_total == fresh.events_stored < first.events_total


def _run(
    trace: Trace,
    store: PostgresEventStore,
    bootstrap: str,
    data_dir: Path,
    *,
    kill_after: int | None = None,
    rate: float | None = None,
) -> dict[str, Any]:
    """Replay with the parts wired by hand, optionally killing the watcher mid-way."""
    topic = replay_topic(store, bootstrap)
    publisher = EventPublisher(bootstrap, data_dir=data_dir, topic=topic)
    ingest = IngestThread(store, bootstrap, topic, DEFAULT_PARTITIONS).start()
    settings = WatchSettings(read_timeout=10, backoff_initial=0.05, resync_seconds=None)
    kills = 0
    with KubeSim(epoch=trace.epoch, history_size=200_000, bookmark_interval=0.1) as sim:
        driver = TraceDriver(sim, trace, "max", max_events_per_second=rate)

        def watcher() -> Watcher:
            w = Watcher(
                client.Configuration(host=sim.url),
                publisher.publish,
                cluster=f"test-{trace.name}",
                store=store,
                clock=sim.clock.now,
                settings=settings,
                checkpoint_interval=0.1,
            ).start()
            assert w.wait_synced(30)
            return w

        current = watcher()
        published = 0
        driver.start()
        if kill_after is not None:
            # once a checkpoint covering every resource type is saved (a watcher killed before
            # its first checkpoint relists, and a pod that lived only in that gap is unseen)
            while current.publisher.stats.published < kill_after or (
                current.publisher.stats.markers < 2
            ):
                time.sleep(0.01)
            published += current.publisher.stats.published
            current.kill()  # no final publish, no final checkpoint
            kills += 1
            current = watcher()
        assert driver.join(120)
        end = time.monotonic() + 60
        while not current.caught_up(sim.store.resource_version):
            assert time.monotonic() < end
            time.sleep(0.02)
        assert current.flush(30)
        published += current.publisher.stats.published
        current.stop()
    driver.stop()
    publisher.drain()
    end = time.monotonic() + 60
    while ingest.consumed < published:
        assert time.monotonic() < end, (ingest.consumed, published)
        time.sleep(0.05)
    ingest.stop()
    publisher.close()
    return {"published": published, "kills": kills, "dead_letters": _dead_letters(store)}


@pytest.mark.parametrize("kill_after", [700, 1500])
def test_watcher_killed_mid_replay_loses_and_duplicates_nothing(
    store: PostgresEventStore, bootstrap: str, tmp_path: Path, kill_after: int
) -> None:
    full = load_replay_trace("openb", "openb")
    nodes = (
        tuple(n for n in full.nodes if n.gpus)[:150]
        + tuple(n for n in full.nodes if not n.gpus)[:50]
    )
    trace = Trace("openb", full.epoch, nodes, full.instances[:400], full.end)
    result = _run(trace, store, bootstrap, tmp_path, kill_after=kill_after, rate=2_000)
    assert result["kills"] == 1 and result["dead_letters"] == 0
    _check_against_trace(store, trace, "kube-watcher/test-openb")
    with store.engine.connect() as conn:
        counts = dict(
            conn.execute(
                select(events_table.c.type, func.count())
                .where(events_table.c.source == "kube-watcher/test-openb")
                .group_by(events_table.c.type)
            ).all()
        )
    assert counts["JobSubmitted"] == 400 and counts["NodeRegistered"] == 200
