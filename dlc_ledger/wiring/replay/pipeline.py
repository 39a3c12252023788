"""The replay's moving parts wired together and waited for: kubesim, watcher, Kafka, ingest.

kubesim plays the trace on its virtual clock; the real watcher lists and watches it and
publishes through the spooling producer; the ingest consumer (on a thread, every partition
statically assigned) appends to the store. :func:`run_pipeline` returns once the trace is
played, watched, published and ingested, and raises on a stalled or failed part.
:class:`Pipeline` holds the running parts for both replays (the closed loop steps kubesim
itself and waits with :meth:`Pipeline.settle` between steps).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from consumers.watchers.checkpoints import WatcherCheckpoints
from consumers.watchers.listwatch import WatchSettings
from consumers.watchers.runner import Watcher
from kubesim import PODS as _PODS
from kubesim import KubeSim
from kubesim.driver import Speed, TraceDriver
from kubesim.traces import Trace
from ledger.errors import Unavailable
from ledger.store.postgres import PostgresEventStore

__all__ = ["IngestThread", "Pipeline", "PipelineRun", "run_pipeline"]

log = logging.getLogger(__name__)


class IngestThread:
    """The ingest consumer on a thread, statically assigned to every partition."""

    def __init__(
        self, store: PostgresEventStore, bootstrap: str, topic: str, partitions: int
    ) -> None:
        from consumers.ingest import IngestConsumer

        self.stop_event = threading.Event()
        self.consumer = IngestConsumer(
            store,
            bootstrap,
            topic=topic,
            group=f"replay-{topic}",
            partitions=list(range(partitions)),
            poll_timeout_ms=100,
        )
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="replay-ingest", daemon=True)

    def _run(self) -> None:
        try:
            self.consumer.run(self.stop_event)
        except BaseException as exc:  # surfaced by the replay loop
            self.error = exc
            log.exception("ingest consumer failed")

    @property
    def consumed(self) -> int:
        return self.consumer.stats.messages

    def start(self) -> IngestThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        self.consumer.close()


@dataclass(frozen=True)
class PipelineRun:
    """What the pipeline moved: messages published and ingested, virtual seconds played."""

    published: int
    ingested: int
    virtual_seconds: float


@dataclass(frozen=True)
class PipelineSite:
    """Where a pipeline runs: the store it fills, the broker and topic it goes through,
    the directory for its spool, and the name the watcher gives the cluster."""

    store: PostgresEventStore
    bootstrap: str
    topic: str
    partitions: int
    data_dir: Path
    cluster: str


def trace_driver(trace: Trace, speed: Speed) -> Callable[[KubeSim], TraceDriver]:
    """How an open-loop pipeline plays ``trace``: kubesim's driver at ``speed``."""
    return lambda sim: TraceDriver(sim, trace, speed, max_backlog=5_000)


class Pipeline:
    """kubesim + watcher + producer + ingest, running; the parts both replays share.

    ``with Pipeline(...) as p`` starts kubesim (with the driver ``make_driver`` builds),
    the ingest thread and the watcher, and waits for the watcher's first LIST; leaving it
    stops them all. :meth:`wait` polls a condition (raising on a failed ingest or the
    deadline), :meth:`settle` waits until everything kubesim holds now is published and
    ingested.
    """

    def __init__(
        self,
        trace: Trace,
        site: PipelineSite,
        make_driver: Callable[[KubeSim], TraceDriver],
        *,
        say: Callable[[str], None],
        interval: float = math.inf,
        timeout: float = math.inf,
    ) -> None:
        self.trace, self.site, self.say, self.interval = trace, site, say, interval
        self.store, self.bootstrap, self.topic = site.store, site.bootstrap, site.topic
        self.partitions, self.data_dir, self.cluster = site.partitions, site.data_dir, site.cluster
        self.make_driver = make_driver
        self.deadline = time.monotonic() + timeout
        self._last = (time.monotonic(), 0)

    def __enter__(self) -> Pipeline:
        from consumers.producer import EventPublisher

        # a new kubesim is a new cluster incarnation: its resourceVersions mean nothing to an
        # old resume point, so the watcher relists; deterministic ids make the overlap a no-op
        WatcherCheckpoints(self.store, self.cluster).forget()
        self.publisher = EventPublisher(
            self.bootstrap, data_dir=self.data_dir / "replay" / self.topic, topic=self.topic
        )
        history = max(100_000, 8 * len(self.trace.instances))
        self.sim = KubeSim(epoch=self.trace.epoch, history_size=history, bookmark_interval=0.2)
        self.sim.start()
        self.driver: TraceDriver | None = None
        self.ingest: IngestThread | None = None
        self.watcher: Watcher | None = None
        try:
            self.driver = self.make_driver(self.sim)
            self.ingest = IngestThread(
                self.store, self.bootstrap, self.topic, self.partitions
            ).start()
            self.watcher = Watcher(
                client.Configuration(host=self.sim.url),
                self.publisher.publish,
                cluster=self.cluster,
                store=self.store,
                clock=self.sim.clock.now,
                settings=WatchSettings(
                    timeout_seconds=300,
                    read_timeout=60.0,
                    backoff_initial=0.1,
                    resync_seconds=None,
                ),
            ).start()
            if not self.watcher.wait_synced(60):
                raise Unavailable("the watchers did not finish their first LIST within 60 s")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self.driver is not None:
            self.driver.stop()
        if self.ingest is not None:
            self.ingest.stop()
        self.publisher.close()
        self.sim.stop()

    @property
    def published(self) -> int:
        assert self.watcher is not None
        return self.watcher.publisher.stats.published

    @property
    def ingested(self) -> int:
        assert self.ingest is not None
        return self.ingest.consumed

    def report(self, stage: str) -> None:
        now = time.monotonic()
        published = self.published
        rate = (published - self._last[1]) / max(1e-6, now - self._last[0])
        self._last = (now, published)
        assert self.driver is not None
        virtual, end = self.driver.progress()
        self.say(
            f"[{stage}] virtual {self.sim.clock.timestamp()} ({virtual / max(1, end):.0%}),"
            f" live pods {len(self.sim.store.items(_PODS))},"
            f" published {published} ({rate:,.0f} ev/s), ingested {self.ingested}"
        )

    def wait(self, condition: Callable[[], bool], stage: str, *, poll: float = 0.05) -> None:
        """Poll ``condition`` until true; progress every ``interval`` seconds."""
        next_report = time.monotonic() + self.interval
        while not condition():
            if self.ingest is not None and self.ingest.error is not None:
                raise Unavailable(f"ingest consumer failed: {self.ingest.error}")
            if time.monotonic() > self.deadline:
                raise Unavailable(f"replay timed out while {stage}")
            time.sleep(poll)
            if time.monotonic() >= next_report:
                self.report(stage)
                next_report = time.monotonic() + self.interval

    def settle(self, *, poll: float = 0.05) -> None:
        """Everything kubesim holds now is watched, published and ingested."""
        assert self.watcher is not None
        watcher = self.watcher
        rv = self.sim.store.resource_version
        self.sim.send_bookmarks()  # idle watches confirm rv at once, not in 0.2 s
        self.wait(lambda: watcher.caught_up(rv), "watching", poll=poll)
        published = self.published
        self.publisher.drain()
        self.wait(lambda: self.ingested >= published, "ingesting", poll=poll)


def run_pipeline(
    trace: Trace,
    site: PipelineSite,
    speed: Speed,
    say: Callable[[str], None],
    interval: float,
    timeout: float,
) -> PipelineRun:
    """Play ``trace`` as cluster ``site.cluster`` through to the store; see the module
    docstring."""
    with Pipeline(
        trace, site, trace_driver(trace, speed), say=say, interval=interval, timeout=timeout
    ) as p:
        assert p.driver is not None and p.watcher is not None
        driver, watcher = p.driver, p.watcher
        driver.start()
        p.wait(driver.done.is_set, "replaying")
        p.wait(lambda: watcher.caught_up(p.sim.store.resource_version), "watching")
        if not watcher.flush(60):
            raise Unavailable("the watcher could not persist its checkpoint")
        published = p.published
        p.publisher.drain()
        p.wait(lambda: p.ingested >= published, "ingesting")
        p.report("done")
        return PipelineRun(published, p.ingested, p.sim.clock.seconds())
