"""The bounded buffer between the watch threads and the Kafka producer.

Reading a watch stream must never wait on Kafka: a watch that is not read falls behind the API
server's window and ends in 410 and a full relist. So the watch threads only append mapped
events to this buffer and return to the stream; one publisher thread drains it in order into
the producer (which spools durably while the broker is away). Only when the buffer is full
does a watch thread wait (back-pressure, logged as a warning), because dropping events or
growing without bound are both worse.

Checkpoint markers travel through the same buffer: a marker (resourceVersions plus the tracker
state that goes with them) is persisted only after every event queued before it was handed to
the producer, so a restarted watcher never skips an event it had not published.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.envelopes import Envelope

__all__ = ["Marker", "Outbox", "PublisherLoop", "PublisherStats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Marker:
    """A consistent cut: resourceVersions and the tracker changes up to them."""

    rvs: dict[str, int]
    changes: dict[str, dict[str, Any] | None]
    done: threading.Event = field(default_factory=threading.Event)


Item = Envelope | Marker


class Outbox:
    """A FIFO bounded in events; markers never count against the bound and never block."""

    def __init__(self, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._items: deque[Item] = deque()
        self._events = 0
        self._cond = threading.Condition()
        self.waits = 0  # how often a producer side had to wait (back-pressure)
        self.waited_seconds = 0.0
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return self._events

    def put(self, events: Sequence[Envelope], *, timeout: float | None = None) -> None:
        if not events:
            return
        with self._cond:
            if self._events + len(events) > self.capacity and self._events > 0:
                started = time.monotonic()
                log.warning(
                    "publish buffer full (%d events): Kafka is slower than the cluster;"
                    " holding the watch until it drains",
                    self._events,
                )
                self.waits += 1  # after the warning: whoever sees the count sees it logged
                self._cond.wait_for(
                    lambda: self._closed or self._events + len(events) <= self.capacity,
                    timeout,
                )
                self.waited_seconds += time.monotonic() - started
            self._items.extend(events)
            self._events += len(events)
            self._cond.notify_all()

    def put_marker(self, marker: Marker) -> None:
        with self._cond:
            self._items.append(marker)
            self._cond.notify_all()

    def take(self, limit: int, timeout: float) -> list[Item]:
        """Up to ``limit`` events (and the markers among them), oldest first."""
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
            out: list[Item] = []
            events = 0
            while self._items and events < limit:
                item = self._items.popleft()
                out.append(item)
                if isinstance(item, Envelope):
                    events += 1
            self._events -= events
            self._cond.notify_all()
            return out

    def empty(self) -> bool:
        with self._cond:
            return not self._items

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


@dataclass(slots=True)
class PublisherStats:
    published: int = 0
    batches: int = 0
    markers: int = 0
    failures: int = 0
    publish_seconds: float = 0.0


class PublisherLoop:
    """Drains an :class:`Outbox` into ``publish`` and persists markers with ``on_marker``.

    ``publish`` must be durable when it returns (the producer sends or spools); if it raises
    (spool full, database down for markers) the loop retries the same items with backoff and
    the outbox fills up, which back-pressures the watch rather than losing anything.
    """

    def __init__(
        self,
        outbox: Outbox,
        publish: Callable[[Sequence[Envelope]], Any],
        on_marker: Callable[[Marker], None],
        *,
        batch: int = 2_000,
        idle: Callable[[], None] | None = None,
        idle_interval: float = 0.5,
        retry_max: float = 10.0,
    ) -> None:
        self.outbox = outbox
        self.publish = publish
        self.on_marker = on_marker
        self.batch = batch
        self.idle = idle
        self.idle_interval = idle_interval
        self.retry_max = retry_max
        self.stats = PublisherStats()
        self._busy = False
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self._busy

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set and the outbox is empty."""
        last_idle = time.monotonic()
        while True:
            items = self.outbox.take(self.batch, timeout=0.05)
            if items:
                self._busy = True
                self._handle(items, stop)
                self._busy = False
            elif stop.is_set():
                return
            if self.idle is not None and time.monotonic() - last_idle >= self.idle_interval:
                last_idle = time.monotonic()
                self.idle()

    def _handle(self, items: list[Item], stop: threading.Event) -> None:
        events: list[Envelope] = []
        for item in items:
            if isinstance(item, Envelope):
                events.append(item)
                continue
            self._retrying(lambda ev=events: self._publish(ev), stop)  # type: ignore[misc]
            events = []
            self._retrying(lambda m=item: self.on_marker(m), stop)  # type: ignore[misc]
            self.stats.markers += 1
            item.done.set()
        self._retrying(lambda: self._publish(events), stop)

    def _publish(self, events: list[Envelope]) -> None:
        if not events:
            return
        started = time.perf_counter()
        self.publish(events)
        self.stats.publish_seconds += time.perf_counter() - started
        self.stats.published += len(events)
        self.stats.batches += 1

    def _retrying(self, action: Callable[[], None], stop: threading.Event) -> None:
        delay = 0.2
        while True:
            try:
                action()
                return
            except Exception as exc:
                self.stats.failures += 1
                log.warning("publishing failed (%s); retrying in %.1fs", exc, delay)
                if stop.wait(delay) and self.stats.failures > 50:
                    raise
                delay = min(self.retry_max, delay * 2)
