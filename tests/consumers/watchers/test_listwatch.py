"""The list-then-watch loop against kubesim and the official client (checklist 1, 2, 7-11, 15)."""

from __future__ import annotations

import random
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import select

from consumers.watchers.listwatch import NODES, PODS, ListWatch, WatchedResource
from kubesim import PODS as SIM_PODS
from kubesim import KubeSim
from kubesim.objects import node_object
from kubesim.resources import NODES as SIM_NODES
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import checkpoints
from tests.support.watchers import (
    Recorder,
    bind,
    fast_settings,
    make_job,
    make_pod,
    settle,
    start_watcher,
    wait_for,
)


def _requests(sim: KubeSim, method: str, plural: str) -> list[dict[str, str]]:
    out = []
    for record in list(sim.requests):
        parts = urlsplit(record.path)
        if record.method == method and parts.path.rstrip("/").endswith("/" + plural):
            out.append({k: v[-1] for k, v in parse_qs(parts.query).items()})
    return out


def test_paginated_list_then_watch_from_its_rv_with_bookmarks(
    sim: KubeSim, recorder: Recorder
) -> None:
    job = make_job(sim, "j1")
    for i in range(7):
        make_pod(sim, job, f"p{i}", node="n1")
    watcher = start_watcher(sim, recorder, resources=(PODS,), page_size=3, orphan_grace=0)
    settle(watcher, sim)
    lists = _requests(sim, "GET", "pods")
    assert [q.get("limit") for q in lists] == ["3", "3", "3"]
    assert "continue" not in lists[0] and all("continue" in q for q in lists[1:])
    watch = _requests(sim, "WATCH", "pods")[0]
    assert watch["resourceVersion"] == str(sim.store.resource_version)
    assert watch["allowWatchBookmarks"] == "true"
    assert len(recorder.of("OccupancyStarted")) == 7
    make_pod(sim, job, "p7", node="n1")
    settle(watcher, sim)
    assert len(recorder.of("OccupancyStarted")) == 8
    watcher.stop()


def test_clean_close_resumes_from_last_rv_without_relisting(
    sim: KubeSim, recorder: Recorder
) -> None:
    # timeoutSeconds=2 x kubesim's timeout_scale 0.1: every watch ends cleanly after 0.2 s
    watcher = start_watcher(sim, recorder, resources=(PODS,), timeout_seconds=2, orphan_grace=0)
    job = make_job(sim, "j1")
    for i in range(3):
        make_pod(sim, job, f"p{i}", node="n1")
        wait_for(lambda n=2 * (i + 1): len(_requests(sim, "WATCH", "pods")) >= n, what="rewatch")
    settle(watcher, sim)
    watches = _requests(sim, "WATCH", "pods")
    assert len(_requests(sim, "GET", "pods")) == 1  # one LIST, never again
    assert len(watches) >= 6
    rvs = [int(q["resourceVersion"]) for q in watches]
    assert rvs == sorted(rvs) and rvs[-1] >= int(job["metadata"]["resourceVersion"])
    assert len(recorder.of("OccupancyStarted")) == 3
    assert watcher.loops["pods"].stats.expired == 0
    watcher.stop()


def test_bookmark_advances_rv_and_publishes_nothing(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=(PODS,))
    before = watcher.resource_versions()["pods"]
    sim.cluster.create(SIM_NODES, node_object("n9", gpus=8, cpu_milli=1000, memory_mib=1024))
    target = sim.store.resource_version
    wait_for(lambda: watcher.resource_versions()["pods"] >= target, what="bookmark")
    assert watcher.resource_versions()["pods"] > before
    assert watcher.loops["pods"].stats.bookmarks >= 1
    assert recorder.events == []
    watcher.stop()


def test_stalled_stream_hits_the_read_timeout_and_resumes(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=(PODS,), read_timeout=0.3, orphan_grace=0)
    job = make_job(sim, "j1")
    sim.stall_watches()
    make_pod(sim, job, "p0", node="n1")  # queued on the stalled stream, never sent there
    settle(watcher, sim)
    loop = watcher.loops["pods"]
    assert loop.stats.reconnects >= 1 and loop.stats.lists == 1
    assert [e.data["pod_name"] for e in recorder.of("OccupancyStarted")] == ["p0"]
    assert all("timeoutSeconds" in q for q in _requests(sim, "WATCH", "pods"))
    watcher.stop()


def test_connection_cut_mid_chunk_resumes_from_last_rv(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=(PODS,), orphan_grace=0)
    job = make_job(sim, "j1")
    make_pod(sim, job, "p0", node="n1")
    settle(watcher, sim)
    rv = watcher.resource_versions()["pods"]
    sim.stall_watches()
    make_pod(sim, job, "p1", node="n1")
    sim.cut_watches()  # half of p1's line, then the connection drops
    sim.resume_watches()
    settle(watcher, sim)
    loop = watcher.loops["pods"]
    assert loop.stats.reconnects >= 1 and loop.stats.lists == 1
    assert int(_requests(sim, "WATCH", "pods")[-1]["resourceVersion"]) >= rv
    names = [e.data["pod_name"] for e in recorder.of("OccupancyStarted")]
    assert names == ["p0", "p1"]
    watcher.stop()


class _Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def listed(self, res: WatchedResource, items: list[Any], rv: int, resync: bool) -> None:
        pass

    def event(self, res: WatchedResource, kind: str, obj: dict[str, Any], rv: int) -> None:
        self.events.append((kind, obj))

    def bookmark(self, res: WatchedResource, rv: int) -> None:
        pass


def _run_loop(sim: KubeSim, loop: ListWatch, until: threading.Event, timeout: float = 10.0) -> None:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert until.wait(timeout)
    loop.stop()
    thread.join(5)


def test_backoff_with_jitter_on_5xx_429_and_empty_watches() -> None:
    from kubernetes import client

    # no bookmarks and 0.1 s watches: every watch ends empty and at once
    with KubeSim(bookmark_interval=60, timeout_scale=0.1) as sim:
        delays: list[float] = []
        done = threading.Event()

        def fake_sleep(seconds: float) -> None:
            delays.append(seconds)
            if len(delays) >= 9:
                done.set()

        settings = fast_settings(
            backoff_initial=1.0, backoff_max=64.0, short_watch=5.0, timeout_seconds=1
        )
        sim.fail_next_requests(3, status=500)
        loop = ListWatch(
            client.ApiClient(_no_retries(sim.url)),
            NODES,
            _Sink(),
            settings=settings,
            sleep=fake_sleep,
            rng=random.Random(7),
        )
        _run_loop(sim, loop, done)
        # three 500s: 1, 2, 4 s bases with equal jitter; then the LIST works and every
        # watch ends empty at once: the streak continues (8, 16, ...), never a hot loop
        bases = [1, 2, 4, 8, 16, 32, 64, 64, 64]
        for delay, base in zip(delays, bases, strict=False):
            assert base / 2 <= delay <= base
        assert len(set(delays)) == len(delays)  # jittered
        assert loop.stats.lists == 1 and loop.stats.errors == 3

        delays.clear()
        done.clear()
        sim.fail_next_requests(1, status=429, retry_after=7)
        loop = ListWatch(
            client.ApiClient(_no_retries(sim.url)),
            NODES,
            _Sink(),
            settings=fast_settings(backoff_initial=0.01, short_watch=0.0),
            sleep=lambda s: (delays.append(s), done.set()),  # type: ignore[func-returns-value]
        )
        _run_loop(sim, loop, done)
        assert delays[0] >= 7.0  # Retry-After honoured


def _no_retries(url: str) -> Any:
    from kubernetes import client

    config = client.Configuration(host=url)
    config.retries = False
    return config


def test_events_split_across_chunks_and_inside_utf8(sim: KubeSim, recorder: Recorder) -> None:
    watcher = start_watcher(sim, recorder, resources=(PODS,), orphan_grace=0)
    sim.split_events(7)  # 7-byte chunks: most lines, and the multi-byte characters, split
    job = make_job(sim, "j1")
    pod = make_pod(sim, job, "p0")

    def annotate(p: dict[str, Any]) -> None:
        p["metadata"]["annotations"]["dlc.ledger/user"] = "研究员-José-🚀"

    sim.cluster.update(SIM_PODS, "ns1", "p0", annotate)
    bind(sim, pod, "n1")
    settle(watcher, sim)
    started = recorder.of("OccupancyStarted")
    assert [e.data["user"] for e in started] == ["研究员-José-🚀"]
    watcher.stop()


def test_each_resource_type_keeps_its_own_rv(
    sim: KubeSim, recorder: Recorder, store: PostgresEventStore
) -> None:
    sim.bookmark_interval = 3600  # no bookmarks: the quiet type keeps its old rv
    sim.cluster.create(SIM_NODES, node_object("n1", gpus=8, cpu_milli=1000, memory_mib=1024))
    watcher = start_watcher(sim, recorder, store=store, resources=(NODES, PODS), orphan_grace=0)
    job = make_job(sim, "j1")
    for i in range(3):
        make_pod(sim, job, f"p{i}", node="n1")
    wait_for(lambda: len(recorder.of("OccupancyStarted")) == 3, what="pods")
    assert watcher.flush(10)
    watcher.stop()
    with store.engine.connect() as conn:
        rows = dict(
            conn.execute(
                select(checkpoints.c.name, checkpoints.c.offsets).where(
                    checkpoints.c.name.like("watch:test:%")
                )
            ).all()
        )
    nodes_rv, pods_rv = rows["watch:test:nodes"]["rv"], rows["watch:test:pods"]["rv"]
    assert nodes_rv < pods_rv == sim.store.resource_version
    sim.requests.clear()
    again = start_watcher(sim, Recorder(), store=store, resources=(NODES, PODS))
    watches = {
        plural: _requests(sim, "WATCH", plural)[0]["resourceVersion"]
        for plural in ("nodes", "pods")
    }
    assert watches == {"nodes": str(nodes_rv), "pods": str(pods_rv)}
    assert _requests(sim, "GET", "pods") == [] and _requests(sim, "GET", "nodes") == []
    again.stop()
