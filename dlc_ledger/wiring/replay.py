"""Replay a public GPU trace through the whole pipeline: kubesim → watchers → Kafka → store.

Nothing is short-circuited: kubesim serves the trace over the Kubernetes API on a virtual
clock, the real watchers list and watch it with the official client and publish through the
producer to Kafka, the ingest consumer appends to PostgreSQL exactly once, and the projector
brings the read models up to date. The run ends once every trace action was observed,
published, ingested and projected, and checks the store against the trace (one
OccupancyStarted per scheduled pod, one OccupancyEnded per deleted scheduled pod).

A replay is reproducible: kubesim derives UIDs from the trace, timestamps come from the
virtual clock and event ids are deterministic, so replaying again into the same database adds
nothing. Each database gets its own replay topic (remembered in the database), so a ``--fresh``
database never ingests a previous run's messages.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from sqlalchemy import func, select, text

from consumers.kafka_settings import DEFAULT_PARTITIONS
from consumers.watchers.checkpoints import WatcherCheckpoints
from consumers.watchers.listwatch import WatchSettings
from consumers.watchers.runner import Watcher
from dlc_ledger.services.prices import publish_price_book
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.yaml_files import load_price_book
from kubesim import PODS as _PODS
from kubesim import KubeSim
from kubesim.driver import Speed, TraceDriver
from kubesim.traces import (
    DLRM_CSV,
    OPENB_NODES_CSV,
    OPENB_PODS_CSV,
    Trace,
    load_dlrm,
    load_openb,
)
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import checkpoints, dead_letters
from ledger.store.schema import events as events_table

__all__ = ["ReplaySummary", "load_replay_trace", "run_replay"]

log = logging.getLogger(__name__)

TOPIC_MARKER = "replay:topic:"


@dataclass
class ReplaySummary:
    """What a replay did and found; ``ok`` when the store matches the trace."""

    trace: str
    cluster: str
    topic: str
    instances: int
    nodes: int
    expected_started: int
    expected_ended: int
    occupancies_started: int = 0
    occupancies_ended: int = 0
    events_stored: int = 0  # added by this run
    events_total: int = 0
    published: int = 0
    ingested: int = 0
    dead_letters: int = 0
    projected: bool = False
    wall_seconds: float = 0.0
    virtual_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.occupancies_started >= self.expected_started
            and self.occupancies_ended >= self.expected_ended
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        return [
            f"replay {self.trace}: {self.instances} jobs on {self.nodes} nodes,"
            f" {self.virtual_seconds:,.0f} virtual s in {self.wall_seconds:.1f} s wall",
            f"events stored: {self.events_stored} new ({self.events_total} in the store),"
            f" {self.published} published, {self.ingested} ingested",
            f"occupancies: {self.occupancies_started} started (trace: {self.expected_started}),"
            f" {self.occupancies_ended} ended (trace: {self.expected_ended})",
            f"dead letters: {self.dead_letters}",
            *self.notes,
        ]


def load_replay_trace(
    trace: str | Path,
    fmt: str,
    *,
    nodes: str | Path | None = None,
    epoch: datetime | None = None,
    limit: int | None = None,
) -> Trace:
    """A trace file (or ``openb`` / ``dlrm`` for the bundled ones) in the given format."""
    from kubesim.clock import DEFAULT_EPOCH

    at = epoch or DEFAULT_EPOCH
    path = str(trace)
    if fmt == "openb":
        pods = OPENB_PODS_CSV if path == "openb" else Path(path)
        loaded = load_openb(pods, Path(nodes) if nodes else OPENB_NODES_CSV, at)
    elif fmt == "dlrm":
        loaded = load_dlrm(DLRM_CSV if path == "dlrm" else Path(path), at)
    else:
        raise ValueError(f"unknown trace format {fmt!r} (openb or dlrm)")
    return loaded.head(limit) if limit else loaded


def _count(store: PostgresEventStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


def _upgrade_if_behind(store: PostgresEventStore) -> None:
    """Migrate only when needed, so a replay on a current schema runs as any writer role."""
    from ledger.store.migrations import SchemaNotCurrent, require_current, upgrade

    try:
        require_current(store.engine)
    except SchemaNotCurrent:
        upgrade(store.engine)


def _reset_database(store: PostgresEventStore) -> None:
    """Drop and recreate the schema, then migrate: an empty ledger."""
    from ledger.store.migrations import upgrade

    with store.engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    store.engine.dispose()
    upgrade(store.engine)
    store.engine.dispose()


def _replay_topic(
    store: PostgresEventStore, bootstrap: str, partitions: int = DEFAULT_PARTITIONS
) -> str:
    """This database's replay topic: remembered in a checkpoint row, created on first use."""
    from consumers.topics import ensure_topic

    with store.engine.connect() as conn:
        name = conn.execute(
            select(checkpoints.c.name).where(
                checkpoints.c.name.startswith(TOPIC_MARKER, autoescape=True)
            )
        ).scalar()
    topic = name[len(TOPIC_MARKER) :] if name else f"dlc.replay-{uuid.uuid4().hex[:12]}"
    ensure_topic(bootstrap, topic, partitions=partitions)
    if not name:
        with store.transaction() as uow:
            uow.save_checkpoint(TOPIC_MARKER + topic, position=0)
    return topic


def _apply_setup(
    store: PostgresEventStore,
    quotas: Path | None,
    pricebook: Path | None,
    epoch: datetime,
    say: Callable[[str], None],
) -> list[str]:
    notes: list[str] = []
    if pricebook is not None:
        result = publish_price_book(store, load_price_book(pricebook), at=epoch)
        say(f"price book {pricebook}: {'published' if result.added else 'already published'}")
    if quotas is not None:
        from dlc_ledger.wiring.context import local_principal

        changes = apply_quota_file(store, quotas.read_text(), principal=local_principal(), at=epoch)
        say(f"quotas {quotas}: {len(changes.lines)} changes applied")
    return notes


class _Ingest:
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

    def start(self) -> _Ingest:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        self.consumer.close()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_replay(
    trace: str | Path = "openb",
    fmt: str = "openb",
    *,
    nodes: str | Path | None = None,
    epoch: datetime | None = None,
    speed: Speed = "max",
    quotas: Path | None = None,
    pricebook: Path | None = None,
    fresh: bool = False,
    yes: bool = False,
    limit: int | None = None,
    partitions: int | None = None,
    store: PostgresEventStore | None = None,
    bootstrap: str | None = None,
    data_dir: Path | None = None,
    project: bool = True,
    progress: Callable[[str], None] | None = _stderr,
    progress_interval: float = 2.0,
    timeout: float = 3_600.0,
) -> ReplaySummary:
    """Replay ``trace`` end to end; see the module docstring. Raises on a stalled pipeline."""
    from dlc_ledger.wiring import context

    say = progress or (lambda _line: None)
    started_wall = time.monotonic()
    epoch_at = epoch
    loaded = load_replay_trace(trace, fmt, nodes=nodes, epoch=epoch_at, limit=limit)
    own_store = store is None
    if fresh and context.settings().database_url and store is None and not yes:
        raise ValueError(
            "--fresh drops every table of the database at DATABASE_URL; add --yes to confirm"
        )
    if store is None:  # a dev tool: it may bring a configured database's schema up to date
        store = context.open_store(create=True, check=False)
        _upgrade_if_behind(store)
    try:
        if fresh:
            _reset_database(store)
            say("fresh: dropped and recreated the database schema")
        bootstrap = bootstrap or context.kafka_bootstrap()
        partitions = partitions or context.settings().partitions
        topic = _replay_topic(store, bootstrap, partitions)
        notes = _apply_setup(store, quotas, pricebook, loaded.epoch, say)
        summary = _replay(
            loaded,
            store,
            bootstrap,
            topic,
            partitions,
            data_dir or context.settings().data_dir,
            speed,
            say,
            progress_interval,
            timeout,
        )
        summary.notes += notes
        if project:
            try:
                from consumers.projector import Projector
                from projections.registry import all_projections
            except ImportError:
                summary.notes.append("projections skipped: no projection registry")
            else:
                say("projecting ...")
                Projector(store, all_projections()).catch_up()
                summary.projected = True
        summary.wall_seconds = time.monotonic() - started_wall
        return summary
    finally:
        if own_store:
            store.close()


def _replay(
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
) -> ReplaySummary:
    from consumers.producer import EventPublisher

    cluster = f"replay-{trace.name}"
    source = f"kube-watcher/{cluster}"
    scheduled = [i for i in trace.instances if i.scheduled is not None]
    summary = ReplaySummary(
        trace=trace.name,
        cluster=cluster,
        topic=topic,
        instances=len(trace.instances),
        nodes=len(trace.nodes),
        expected_started=len(scheduled),
        expected_ended=sum(1 for i in scheduled if i.deleted is not None),
    )
    events_before = _count(store, select(func.count()).select_from(events_table))
    dead_before = _count(store, select(func.count()).select_from(dead_letters))
    # a new kubesim is a new cluster incarnation: its resourceVersions mean nothing to an old
    # resume point, so the watcher relists; deterministic ids make the overlap a no-op
    WatcherCheckpoints(store, cluster).forget()
    deadline = time.monotonic() + timeout
    publisher = EventPublisher(bootstrap, data_dir=data_dir / "replay" / topic, topic=topic)
    history = max(100_000, 8 * len(trace.instances))
    with KubeSim(epoch=trace.epoch, history_size=history, bookmark_interval=0.2) as sim:
        driver = TraceDriver(sim, trace, speed, max_backlog=5_000)
        ingest = _Ingest(store, bootstrap, topic, partitions).start()
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
            summary.published = watcher.publisher.stats.published
            publisher.drain()
            wait(lambda: ingest.consumed >= summary.published, "ingesting")
            report("done")
            summary.virtual_seconds = sim.clock.seconds()
        finally:
            watcher.stop()
            driver.stop()
            ingest.stop()
            publisher.close()
    summary.ingested = ingest.consumed
    with store.engine.connect() as conn:
        counts: dict[str, int] = dict(
            conn.execute(
                select(events_table.c.type, func.count())
                .where(
                    events_table.c.source == source,
                    events_table.c.type.in_(["OccupancyStarted", "OccupancyEnded"]),
                )
                .group_by(events_table.c.type)
            ).all()
        )
    summary.occupancies_started = int(counts.get("OccupancyStarted", 0))
    summary.occupancies_ended = int(counts.get("OccupancyEnded", 0))
    summary.events_total = _count(store, select(func.count()).select_from(events_table))
    summary.events_stored = summary.events_total - events_before
    summary.dead_letters = (
        _count(store, select(func.count()).select_from(dead_letters)) - dead_before
    )
    return summary
