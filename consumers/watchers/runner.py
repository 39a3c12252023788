"""One watcher process: a list-watch loop per resource type, the tracker, the publisher.

Threads: one :class:`~consumers.watchers.listwatch.ListWatch` per resource type (they only
parse, map under one lock and append to the outbox), and one publisher thread that drains the
outbox into the producer and persists checkpoints. Relists are reconciled here: objects the
tracker knew that a fresh LIST lacks get exactly one end event, present ones are diffed, and a
periodic resync checks every bound, live pod's OccupancyStarted against the store and
republishes any that went missing (drift repair).

Poison. An object the tracker cannot map (a timestamp a ``datetime`` cannot hold or outside
the facts' bounds, a quantity ``Infinity``: :func:`ledger.store.failures.is_poison`) is
quarantined, not retried: it is recorded as a dead letter (source ``watch:<cluster>:<resource>``,
reason ``unmappable-object``, payload the raw object) and skipped, and the watch goes on
past it. Without that the error left the list-watch loop before its resourceVersion moved,
so the loop resumed at the same event (or relisted the same LIST) forever. The object is
looked at again when it changes or at the next relist; a watcher without a store only logs
it. What the tracker recorded before the failure stays (its state is per object).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from kubernetes import client

from consumers.watchers.checkpoints import WatcherCheckpoints
from consumers.watchers.event_factory import EventFactory
from consumers.watchers.listwatch import (
    DEFAULT_RESOURCES,
    ListWatch,
    WatchedResource,
    WatchSettings,
)
from consumers.watchers.metrics import record_emitted
from consumers.watchers.publisher import Marker, Outbox, PublisherLoop
from consumers.watchers.tracker import ClusterTracker, state_key
from ledger.envelopes import Envelope
from ledger.store.base import EventStore
from ledger.store.failures import is_poison

__all__ = ["QUARANTINE_REASON", "Watcher", "WatcherStats"]

#: The reason of a dead letter for a watched object the tracker cannot map.
QUARANTINE_REASON = "unmappable-object"

log = logging.getLogger(__name__)

Object = dict[str, Any]


@dataclass(slots=True)
class WatcherStats:
    observed: int = 0  # watch events and listed objects mapped
    emitted: int = 0  # events handed to the outbox
    vanished: int = 0
    repaired: int = 0
    relists: int = 0
    quarantined: int = 0  # objects that could not be mapped: dead-lettered, skipped


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Watcher:
    """Watches a cluster and publishes its facts; ``start()`` / ``stop()`` or ``run(stop)``.

    ``publish`` receives envelopes in order and must be durable on return (the Kafka
    producer's ``publish``). ``store`` (optional) holds the resume point; without it every
    start relists and relies on deterministic ids to publish nothing new to the store.
    """

    def __init__(
        self,
        configuration: client.Configuration,
        publish: Callable[[Sequence[Envelope]], Any],
        *,
        cluster: str = "default",
        store: EventStore | None = None,
        resources: Iterable[WatchedResource] = DEFAULT_RESOURCES,
        settings: WatchSettings | None = None,
        clock: Callable[[], datetime] = _utcnow,
        sleep: Callable[[float], None] | None = None,
        buffer_events: int = 50_000,
        checkpoint_interval: float = 0.5,
        orphan_grace: float = 5.0,
        publish_batch: int = 2_000,
    ) -> None:
        config = client.Configuration()
        for key, value in vars(configuration).items():
            setattr(config, key, value)
        # our loop honours Retry-After and backs off itself; urllib3 must not sleep for us
        config.retries = False
        self.api = client.ApiClient(config)
        self.cluster = cluster
        self.store = store
        self.resources = tuple(resources)
        self.settings = settings or WatchSettings()
        self.clock = clock
        self.stats = WatcherStats()
        self.factory = EventFactory(cluster)
        job_kinds = [r.kind for r in self.resources if r.tracker_resource == "jobs"]
        workload_kinds = [r.kind for r in self.resources if r.tracker_resource == "workloads"]
        self.tracker = ClusterTracker(
            self.factory,
            clock,
            watched_job_kinds=job_kinds,
            watched_workload_kinds=workload_kinds,
            watch_nodes=any(r.tracker_resource == "nodes" for r in self.resources),
            orphan_grace=orphan_grace,
        )
        self.outbox = Outbox(buffer_events)
        self.checkpoints = WatcherCheckpoints(store, cluster) if store is not None else None
        self.publisher = PublisherLoop(
            self.outbox,
            publish,
            self._save_marker,
            batch=publish_batch,
            idle=self._idle_mark,
            idle_interval=checkpoint_interval,
        )
        self._lock = threading.RLock()
        self._rvs: dict[str, int] = {}
        self._stop = threading.Event()
        self._publisher_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        resume_rvs: dict[str, int] = {}
        if self.checkpoints is not None:
            resume = self.checkpoints.load()
            self.tracker.load(resume.state)
            resume_rvs = resume.rvs
        self.loops = {
            res.name: ListWatch(
                self.api,
                res,
                self,
                settings=self.settings,
                start_rv=resume_rvs.get(res.name),
                sleep=sleep,
            )
            for res in self.resources
        }
        self._rvs = {name: rv for name, rv in resume_rvs.items() if name in self.loops}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Watcher:
        publisher = threading.Thread(
            target=self.publisher.run, args=(self._publisher_stop,), name="watch-publisher"
        )
        publisher.daemon = True
        publisher.start()
        self._threads.append(publisher)
        for name, loop in self.loops.items():
            thread = threading.Thread(target=loop.run, args=(self._stop,), name=f"watch-{name}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop reading, publish what was read, save the final checkpoint."""
        self._stop.set()
        for loop in self.loops.values():
            loop.stop()
        for thread in self._threads[1:]:
            thread.join(timeout)
        self.mark()
        self._publisher_stop.set()
        if self._threads:
            self._threads[0].join(timeout)
        self._threads.clear()
        self.api.close()  # type: ignore[no-untyped-call]

    def kill(self) -> None:
        """Stop without publishing what is buffered or saving a checkpoint (a crash)."""
        self._stop.set()
        self.outbox.close()
        for loop in self.loops.values():
            loop.stop()
        self.publisher.on_marker = lambda _m: None
        self.publisher.publish = lambda _e: None
        self._publisher_stop.set()
        for thread in self._threads:
            thread.join(5)
        self._threads.clear()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- progress --------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(loop.synced.is_set() for loop in self.loops.values())

    def wait_synced(self, timeout: float = 30.0) -> bool:
        end = time.monotonic() + timeout
        for loop in self.loops.values():
            if not loop.synced.wait(max(0.0, end - time.monotonic())):
                return False
        return True

    def resource_versions(self) -> dict[str, int]:
        with self._lock:
            return dict(self._rvs)

    def caught_up(self, rv: int) -> bool:
        """Every loop has read up to ``rv`` and everything read was published."""
        with self._lock:
            behind = any(self._rvs.get(name, -1) < rv for name in self.loops)
            pending = self.tracker.pending_count
        return not behind and not pending and self.outbox.empty() and not self.publisher.busy

    def flush(self, timeout: float = 30.0) -> bool:
        """Queue a checkpoint and wait until it (and everything before it) is persisted."""
        marker = self.mark()
        return marker.done.wait(timeout)

    # -- sink (called by the list-watch threads) -------------------------------------------

    def listed(self, res: WatchedResource, items: list[Object], rv: int, resync: bool) -> None:
        tracker_res = res.tracker_resource
        out: list[Envelope] = []
        repair: list[Envelope] = []
        with self._lock:
            self.stats.relists += 1
            known = self.tracker.keys_of(tracker_res, res.kind)
            seen = set()
            for item in items:
                seen.add(state_key(tracker_res, item))
                try:
                    out += self.tracker.observe(tracker_res, "MODIFIED", item)
                    candidate = (
                        self.tracker.open_occupancy_events(item)
                        if resync and tracker_res == "pods"
                        else None
                    )
                except Exception as exc:
                    if not is_poison(exc):
                        raise
                    self._quarantine(res, item, exc)
                    continue
                if candidate is not None:
                    repair.append(candidate)
            missing = known - seen
            if missing:
                log.warning("%s: %d objects vanished during relist", res.name, len(missing))
            out += self.tracker.vanished(missing)
            self.stats.vanished += len(missing)
            self.stats.observed += len(items)
            out += self._repair(repair, out)
            self._rvs[res.name] = rv
            self._emit(out)

    def event(self, res: WatchedResource, kind: str, obj: Object, rv: int) -> None:
        with self._lock:
            self.stats.observed += 1
            try:
                out = self.tracker.observe(res.tracker_resource, kind, obj)
            except Exception as exc:
                if not is_poison(exc):
                    raise
                self._quarantine(res, obj, exc)
                out = []
            if rv:
                self._rvs[res.name] = rv
            self._emit(out)

    def _quarantine(self, res: WatchedResource, obj: Object, exc: Exception) -> None:
        """Record an object the tracker cannot map as a dead letter; the watch goes on."""
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = f"{meta.get('namespace') or ''}/{meta.get('name')} (uid {meta.get('uid')})"
        self.stats.quarantined += 1
        log.warning("%s: object %s skipped, cannot be mapped: %s", res.name, name, exc)
        if self.store is None:
            return
        payload = orjson.dumps(obj, default=str, option=orjson.OPT_SORT_KEYS)
        with self.store.transaction() as uow:
            uow.record_dead_letter(
                source=f"watch:{self.cluster}:{res.name}",
                reason=QUARANTINE_REASON,
                error=f"{res.kind} {name}: {type(exc).__name__}: {exc}",
                payload=payload,
            )

    def bookmark(self, res: WatchedResource, rv: int) -> None:
        with self._lock:
            self._rvs[res.name] = rv

    def _emit(self, out: list[Envelope]) -> None:
        if out:
            self.stats.emitted += len(out)
            record_emitted(out)
            self.outbox.put(out)

    def _repair(self, candidates: list[Envelope], queued: list[Envelope]) -> list[Envelope]:
        """Drift repair: live bound pods whose OccupancyStarted the store does not hold."""
        if not candidates or self.store is None:
            return []
        queued_ids = {e.event_id for e in queued}
        ids = [e.event_id for e in candidates if e.event_id not in queued_ids]
        present = self.store.stored_event_ids(ids)
        missing = [e for e in candidates if e.event_id not in present and e.event_id in ids]
        if missing:
            log.warning("drift repair: republishing %d missing OccupancyStarted", len(missing))
            self.stats.repaired += len(missing)
        return missing

    # -- checkpoints -----------------------------------------------------------------------

    def mark(self) -> Marker:
        """Queue a checkpoint marker after everything emitted so far."""
        with self._lock:
            orphans = self.tracker.flush_orphans()
            self._emit(orphans)
            rvs = dict(self._rvs)
            pending_rv = self.tracker.pending_min_rv()
            if pending_rv is not None and "pods" in rvs:
                rvs["pods"] = min(rvs["pods"], pending_rv - 1)
            marker = Marker(rvs, self.tracker.take_delta().changes)
            self.outbox.put_marker(marker)
            return marker

    def _idle_mark(self) -> None:
        # the publisher thread must never wait for a watch thread that waits for it
        if self._lock.acquire(blocking=False):
            try:
                self.mark()
            finally:
                self._lock.release()

    def _save_marker(self, marker: Marker) -> None:
        if self.checkpoints is not None and (marker.rvs or marker.changes):
            self.checkpoints.save(marker)
