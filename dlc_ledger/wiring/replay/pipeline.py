"""The replay's moving parts wired together and waited for: kubesim, watcher, Kafka, ingest.

kubesim plays the trace on its virtual clock; the real watcher lists and watches it and
publishes through the spooling producer; the ingest consumer (on a thread, every partition
statically assigned) appends to the store. :func:`run_pipeline` returns once the trace is
played, watched, published and ingested, and raises on a stalled or failed part.
"""

from __future__ import annotations

import logging
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
from ledger.store.postgres import PostgresEventStore

__all__ = ["IngestThread", "PipelineRun", "run_pipeline"]

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


def run_pipeline(
    trace: Trace,
    store: PostgresEventStore,
    bootstrap: str,
    topic: str,
    partitions: int,
    data_dir: Path,
    speed: Speed,
    say: Callable[[str], None],
    interval: float,
    timeout: float,
    *,
    cluster: str,
) -> PipelineRun:
    """Play ``trace`` as cluster ``cluster`` through to the store; see the module docstring."""
    from consumers.producer import EventPublisher

    # a new kubesim is a new cluster incarnation: its resourceVersions mean nothing to an old
    # resume point, so the watcher relists; deterministic ids make the overlap a no-op
    WatcherCheckpoints(store, cluster).forget()
    deadline = time.monotonic() + timeout
    publisher = EventPublisher(bootstrap, data_dir=data_dir / "replay" / topic, topic=topic)
    history = max(100_000, 8 * len(trace.instances))
    with KubeSim(epoch=trace.epoch, history_size=history, bookmark_interval=0.2) as sim:
        driver = TraceDriver(sim, trace, speed, max_backlog=5_000)
        ingest = IngestThread(store, bootstrap, topic, partitions).start()
        watcher = Watcher(
            client.Configuration(host=sim.url),
            publisher.publish,
            cluster=cluster,
            store=store,
            clock=sim.clock.now,
            settings=WatchSettings(
                timeout_seconds=300, read_timeout=60.0, backoff_initial=0.1, resync_seconds=None
            ),
        ).start()
        try:
            if not watcher.wait_synced(60):
                raise RuntimeError("the watchers did not finish their first LIST within 60 s")
            driver.start()
            last = (time.monotonic(), 0)

            def report(stage: str) -> None:
                nonlocal last
                now = time.monotonic()
                published = watcher.publisher.stats.published
                rate = (published - last[1]) / max(1e-6, now - last[0])
                last = (now, published)
                virtual, end = driver.progress()
                say(
                    f"[{stage}] virtual {sim.clock.timestamp()} ({virtual / max(1, end):.0%}),"
                    f" live pods {len(sim.store.items(_PODS))},"
                    f" published {published} ({rate:,.0f} ev/s), ingested {ingest.consumed}"
                )

            def wait(condition: Callable[[], bool], stage: str) -> None:
                next_report = time.monotonic() + interval
                while not condition():
                    if ingest.error is not None:
                        raise RuntimeError(f"ingest consumer failed: {ingest.error}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"replay timed out while {stage}")
                    time.sleep(0.05)
                    if time.monotonic() >= next_report:
                        report(stage)
                        next_report = time.monotonic() + interval

            wait(driver.done.is_set, "replaying")
            wait(lambda: watcher.caught_up(sim.store.resource_version), "watching")
            if not watcher.flush(60):
                raise RuntimeError("the watcher could not persist its checkpoint")
            published = watcher.publisher.stats.published
            publisher.drain()
            wait(lambda: ingest.consumed >= published, "ingesting")
            report("done")
            virtual_seconds = sim.clock.seconds()
        finally:
            watcher.stop()
            driver.stop()
            ingest.stop()
            publisher.close()
    return PipelineRun(published, ingest.consumed, virtual_seconds)
