"""Fixtures of the watcher tests: kubesim, the official client, a recording publisher.

Most checklist tests record what the watcher publishes (the checklist is about what is read and
emitted); the end-to-end tests publish through the real producer to the real Tansu broker of
the Kafka tests (its fixture is imported, not copied) and ingest into PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kubernetes import client

from consumers.watchers.listwatch import DEFAULT_RESOURCES, WatchedResource, WatchSettings
from consumers.watchers.runner import Watcher
from kubesim import BATCH_JOBS, PODS, KubeSim
from kubesim.objects import bind_pod, job_object, pod_object, terminate_pod
from kubesim.store import Object
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "Recorder",
    "bind",
    "fast_settings",
    "make_job",
    "make_pod",
    "settle",
    "start_watcher",
    "terminate",
    "wait_for",
]


class Recorder:
    """A publish function that keeps what it was given, in order."""

    def __init__(self) -> None:
        self.events: list[Envelope] = []
        self._lock = threading.Lock()

    def __call__(self, events: Sequence[Envelope]) -> None:
        with self._lock:
            self.events.extend(events)

    def types(self) -> list[str]:
        with self._lock:
            return [e.type for e in self.events]

    def of(self, type_: str) -> list[Envelope]:
        with self._lock:
            return [e for e in self.events if e.type == type_]

    def clear(self) -> None:
        with self._lock:
            self.events.clear()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def fast_settings(**overrides: Any) -> WatchSettings:
    values: dict[str, Any] = {
        "page_size": 100,
        "timeout_seconds": 60,
        "read_timeout": 2.0,
        "connect_timeout": 2.0,
        "backoff_initial": 0.01,
        "backoff_max": 0.2,
        "short_watch": 0.0,
        "resync_seconds": None,
    }
    values.update(overrides)
    return WatchSettings(**values)


def start_watcher(
    sim: KubeSim,
    publish: Callable[[Sequence[Envelope]], Any],
    *,
    store: PostgresEventStore | None = None,
    resources: Sequence[WatchedResource] = DEFAULT_RESOURCES,
    cluster: str = "test",
    start: bool = True,
    **settings: Any,
) -> Watcher:
    extra = {
        k: settings.pop(k) for k in ("buffer_events", "orphan_grace", "sleep") if k in settings
    }
    watcher = Watcher(
        client.Configuration(host=sim.url),
        publish,
        cluster=cluster,
        store=store,
        resources=resources,
        settings=fast_settings(**settings),
        clock=sim.clock.now,
        checkpoint_interval=0.05,
        **({"orphan_grace": 0.5} | extra),
    )
    if start:
        watcher.start()
        assert watcher.wait_synced(10)
        loops = watcher.loops.values()
        wait_for(lambda: all(loop.watching for loop in loops), what="watches open")
    return watcher


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def settle(watcher: Watcher, sim: KubeSim, timeout: float = 10.0) -> None:
    """Wait until the watcher read, mapped and published everything up to the current rv."""
    rv = sim.store.resource_version
    wait_for(lambda: watcher.caught_up(rv), timeout, f"watcher caught up to rv {rv}")
    assert watcher.flush(timeout)


def make_job(sim: KubeSim, name: str, namespace: str = "ns1", **labels: str) -> Object:
    job = job_object(
        name,
        namespace,
        labels={"dlc.ledger/workspace": "ws-a", **labels},
        annotations={"dlc.ledger/gpu-milli": "500"},
        cpu_milli=2000,
        memory_mib=1024,
        gpus=1,
        priority=100,
    )
    return sim.cluster.create(BATCH_JOBS, job)


def make_pod(sim: KubeSim, job: Object, name: str, node: str | None = None) -> Object:
    pod = sim.cluster.create(PODS, pod_object(name, job, sim.clock.timestamp()))
    if node is not None:
        pod = bind(sim, pod, node)
    return pod


def bind(sim: KubeSim, pod: Object, node: str) -> Object:
    now = sim.clock.timestamp()
    meta = pod["metadata"]
    return sim.cluster.update(
        PODS, meta["namespace"], meta["name"], lambda p: bind_pod(p, node, now)
    )


def terminate(sim: KubeSim, pod: Object, *, failed: bool = False) -> Object:
    now = sim.clock.timestamp()
    meta = pod["metadata"]
    return sim.cluster.update(
        PODS, meta["namespace"], meta["name"], lambda p: terminate_pod(p, now, failed=failed)
    )
