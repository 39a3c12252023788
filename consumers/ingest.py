"""The ingest consumer: Kafka ``dlc.cluster-events`` into the event store, exactly once.

Exactly-once *effects* come from the database, not from Kafka (DESIGN §4): each
poll batch is validated, then in ONE store transaction the valid events are
appended, the invalid ones recorded as dead letters (with topic, partition,
offset and reason), and the next offset of every partition saved in the
``ingest:<group>`` checkpoint. Whatever happens, the events and the offsets that
account for them commit together or not at all. On (re)assignment the consumer
seeks to the stored offsets; Kafka's own committed offsets are written after the
database commit, for lag tooling only.

Inside the transaction the checkpoint row is read ``FOR UPDATE`` and messages
below the stored offset are dropped, so a consumer that lost its partition
during a long stall (a zombie) cannot write an event twice or move the
checkpoint backwards. Redelivered events that were stored already are no-ops in
the store (same ``event_id``, same fact).

A failing database (connection lost, server restarting) is not a poison
message: the batch is rolled back, the consumer rewinds to the last stored
offsets, pauses with exponential backoff while staying in its group, and tries
again (which failure is whose: :mod:`consumers.store_failures`). SIGTERM lets the batch in
hand finish, then the consumer leaves its group (the command is :mod:`dlc_ledger.cli.ingest`,
its signal handling :mod:`dlc_ledger.wiring.signals`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from consumers import metrics
from consumers.kafka_settings import (
    DEFAULT_GROUP,
    DEFAULT_TOPIC,
    checkpoint_name,
    consumer_config,
    offsets_key,
)
from consumers.store_failures import is_transient_store_error, is_unstorable
from ledger.catalogue import envelope_from_wire
from ledger.envelopes import Envelope, EventDecodeError, InvalidEvent
from ledger.events import check_cluster_fact
from ledger.store.base import DuplicateEventConflict, EventStore, UnitOfWork

__all__ = ["IngestConsumer", "IngestStats", "run_ingest"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class IngestStats:
    """Counters of one :func:`run_ingest` call."""

    messages: int = 0
    appended: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    skipped: int = 0  # below the stored offset: another consumer had them already
    batches: int = 0
    store_failures: int = 0
    broker_failures: int = 0  # polls the broker failed (it restarted, the network cut)
    started: float = field(default_factory=time.monotonic)
    first_data_at: float | None = None  # when the first non-empty poll returned
    last_batch_at: float | None = None  # when the last batch committed

    @property
    def busy_seconds(self) -> float:
        """From the first data to the last commit: the rate base, without group-join time."""
        if self.first_data_at is None or self.last_batch_at is None:
            return 0.0
        return self.last_batch_at - self.first_data_at

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(slots=True)
class _Decoded:
    offset: int
    raw: bytes
    envelope: Envelope | None
    error: EventDecodeError | None


class Unstorable(EventDecodeError):
    reason = "unstorable"


def _decode(raw: bytes | None) -> tuple[Envelope | None, EventDecodeError | None]:
    if raw is None:
        return None, InvalidEvent("message has no value (tombstone)")
    try:
        envelope = envelope_from_wire(raw)
        check_cluster_fact(envelope)  # the topic carries only what a watcher observes
        return envelope, None
    except EventDecodeError as exc:
        return None, exc
    except Exception as exc:  # whatever one message does, it must not stop the consumer
        return None, InvalidEvent(f"{type(exc).__name__}: {exc}")


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: IngestConsumer) -> None:
        self.owner = owner

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self.owner._revoked(revoked)

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self.owner._assigned(assigned)


class IngestConsumer:
    """One ingest consumer process; see the module docstring for its guarantees.

    ``partitions`` pins the consumer to those partitions (static assignment, no
    group rebalancing); by default it subscribes to ``topic`` in ``group``.
    """

    def __init__(
        self,
        store: EventStore,
        bootstrap: str,
        *,
        topic: str = DEFAULT_TOPIC,
        group: str = DEFAULT_GROUP,
        checkpoint: str | None = None,
        partitions: Sequence[int] | None = None,
        poll_timeout_ms: int = 500,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        lag_interval: float = 10.0,
        **kafka_overrides: Any,
    ) -> None:
        self.store = store
        self.topic = topic
        self.group = group
        self.checkpoint = checkpoint or checkpoint_name(group)
        self.poll_timeout_ms = poll_timeout_ms
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.lag_interval = lag_interval
        self.stats = IngestStats()
        self.dead_letter_source = f"kafka:{topic}"
        config = consumer_config(**kafka_overrides)
        self.max_records = int(config.pop("max_poll_records"))
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            max_poll_records=self.max_records,
            **config,
        )
        # next offset per partition as stored in the database (None: none stored yet)
        self._stored: dict[TopicPartition, int | None] = {}
        self._unseeked: set[TopicPartition] = set()
        self._gap_reseeks: dict[TopicPartition, int] = {}
        self._failures = 0
        self._lag_at = 0.0
        if partitions is None:
            self.consumer.subscribe([topic], listener=_Listener(self))
        else:
            assigned = [TopicPartition(topic, p) for p in partitions]
            self.consumer.assign(assigned)
            self._assigned(assigned)

    # -- assignment -----------------------------------------------------------------------

    def _revoked(self, revoked: Sequence[TopicPartition]) -> None:
        for tp in revoked:
            self._stored.pop(tp, None)
            self._unseeked.discard(tp)
            self._gap_reseeks.pop(tp, None)
            with contextlib.suppress(KeyError):
                metrics.INGEST_LAG.remove(tp.topic, str(tp.partition))

    def _assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self._unseeked.update(assigned)
        try:
            self._seek_to_stored()
        except Exception as exc:
            if not is_transient_store_error(exc):
                raise
            # the database is down: hold these partitions until we know where to start
            log.warning("cannot read checkpoint %s (%s); pausing partitions", self.checkpoint, exc)
            self.consumer.pause(*self._unseeked)

    def _seek_to_stored(self) -> None:
        """Seek every not-yet-positioned partition to the offset stored in the database."""
        if not self._unseeked:
            return
        with self.store.transaction() as uow:
            offsets = uow.load_checkpoint(self.checkpoint).offsets
        for tp in list(self._unseeked):
            self._seek(tp, offsets.get(offsets_key(tp.topic, tp.partition)))
            self._unseeked.discard(tp)
        self.consumer.resume(*self.consumer.assignment())

    def _seek(self, tp: TopicPartition, offset: int | None) -> None:
        self._stored[tp] = offset
        if offset is None:
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek(tp, offset)

    # -- the loop -------------------------------------------------------------------------

    def run(
        self,
        stop_event: threading.Event,
        *,
        max_messages: int | None = None,
        idle_timeout: float | None = None,
        on_batch: Callable[[IngestStats], None] | None = None,
    ) -> IngestStats:
        """Consume until ``stop_event`` is set (or the optional limits are reached)."""
        last_data = time.monotonic()
        while not stop_event.is_set():
            if max_messages is not None and self.stats.messages >= max_messages:
                break
            if self._unseeked:
                try:
                    self._seek_to_stored()
                except Exception as exc:
                    if not is_transient_store_error(exc):
                        raise
                    self._backoff(stop_event, exc)
                    continue
            try:
                polled = self.consumer.poll(
                    timeout_ms=self.poll_timeout_ms, max_records=self.max_records
                )
            except (KafkaError, OSError) as exc:
                # the broker went away (restarted, the network cut): the client reconnects
                # on a later poll, and what was not returned is fetched again from the
                # positions it kept (the stored offsets, not Kafka's, say what is stored)
                self._broker_lost(stop_event, exc)
                continue
            if not polled:
                if not self.consumer.assignment():
                    last_data = time.monotonic()  # joining a group is not idleness
                if idle_timeout is not None and time.monotonic() - last_data > idle_timeout:
                    break
                self._update_lag()
                continue
            last_data = time.monotonic()
            if self.stats.first_data_at is None:
                self.stats.first_data_at = last_data
            try:
                self._ingest(polled)
            except Exception as exc:
                if not is_transient_store_error(exc):
                    raise
                self._rewind(polled)
                self._backoff(stop_event, exc)
                continue
            self._failures = 0
            if on_batch is not None:
                on_batch(self.stats)
            self._update_lag()
        return self.stats

    def _ingest(self, polled: Mapping[TopicPartition, Sequence[Any]]) -> None:
        # validation is pure CPU: do it before the transaction to keep locks short
        decoded = {
            tp: [_Decoded(r.offset, r.value or b"", *_decode(r.value)) for r in records]
            for tp, records in polled.items()
        }
        stats = self.stats
        conflicts: set[Any] = set()
        isolate = False
        while True:
            started = time.perf_counter()
            try:
                with self.store.transaction() as uow:
                    result = self._transact(uow, decoded, conflicts, isolate)
                break
            except DuplicateEventConflict as exc:  # same id, different fact: dead-letter it
                if exc.event_id in conflicts:
                    raise
                conflicts.add(exc.event_id)
            except Exception as exc:
                # the store refused something in the batch: again, one event at a time,
                # so the culprit is dead-lettered and its neighbours stored
                if isolate or not is_unstorable(exc):
                    raise
                log.warning("batch refused by the store (%s); isolating the culprit", exc)
                isolate = True
        metrics.APPEND_SECONDS.observe(time.perf_counter() - started)
        advanced, appended, duplicates, dead, skipped, reseek = result
        for tp, offset in advanced.items():
            self._stored[tp] = offset
        for tp, offset in reseek.items():
            self._seek(tp, offset)
        stats.batches += 1
        stats.last_batch_at = time.monotonic()
        stats.messages += sum(len(v) for v in decoded.values())
        stats.appended += appended
        stats.duplicates += duplicates
        stats.dead_letters += len(dead)
        stats.skipped += skipped
        metrics.BATCHES.inc()
        metrics.EVENTS_INGESTED.inc(appended)
        metrics.EVENTS_DUPLICATE.inc(duplicates)
        for reason in dead:
            metrics.DEAD_LETTERS.labels(reason).inc()
        if advanced:
            self._commit_hint(advanced)

    def _transact(
        self,
        uow: UnitOfWork,
        decoded: Mapping[TopicPartition, list[_Decoded]],
        conflicts: set[Any],
        isolate: bool = False,
    ) -> tuple[dict[TopicPartition, int], int, int, list[str], int, dict[TopicPartition, int]]:
        stored = uow.load_checkpoint(self.checkpoint, for_update=True).offsets
        valid: list[Envelope] = []
        raw_of: dict[Any, tuple[TopicPartition, _Decoded]] = {}
        dead: list[str] = []
        advanced: dict[TopicPartition, int] = {}
        reseek: dict[TopicPartition, int] = {}
        skipped = 0
        for tp, items in decoded.items():
            key = offsets_key(tp.topic, tp.partition)
            floor = stored.get(key)
            if floor is not None:
                fresh = [d for d in items if d.offset >= floor]
                skipped += len(items) - len(fresh)
                if fresh and fresh[0].offset > floor and self._gap_reseeks.get(tp) != floor:
                    # we would skip offsets [floor, first): go back and read them
                    log.warning(
                        "%s: got offset %d, stored %d; re-seeking", tp, fresh[0].offset, floor
                    )
                    self._gap_reseeks[tp] = floor
                    reseek[tp] = floor
                    continue
                items = fresh
            if not items:
                if floor is not None and self._stored.get(tp) != floor:
                    reseek[tp] = floor  # another consumer moved on: follow it
                continue
            for item in items:
                if item.envelope is not None and item.envelope.event_id not in conflicts:
                    valid.append(item.envelope)
                    raw_of[item.envelope.event_id] = (tp, item)
                    continue
                if item.envelope is not None:
                    reason, error = (
                        "conflicting-duplicate",
                        str(DuplicateEventConflict(item.envelope.event_id)),
                    )
                else:
                    assert item.error is not None
                    reason, error = item.error.reason, str(item.error)
                uow.record_dead_letter(
                    source=self.dead_letter_source,
                    reason=reason,
                    error=error,
                    payload=item.raw,
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=item.offset,
                )
                dead.append(reason)
            advanced[tp] = items[-1].offset + 1
        appended = duplicates = 0
        if valid and not isolate:
            result = uow.append(valid)
            appended, duplicates = len(result.positions), len(result.duplicates)
        for envelope in valid if isolate else ():
            savepoint = uow.connection.begin_nested()
            try:
                result = uow.append([envelope])
            except Exception as exc:
                savepoint.rollback()
                if not is_unstorable(exc):
                    raise
                tp, item = raw_of[envelope.event_id]
                first_line = (str(exc).splitlines() or [""])[0]
                uow.record_dead_letter(
                    source=self.dead_letter_source,
                    reason=Unstorable.reason,
                    error=f"the store refused it: {type(exc).__name__}: {first_line}",
                    payload=item.raw,
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=item.offset,
                )
                dead.append(Unstorable.reason)
                continue
            savepoint.commit()
            appended += len(result.positions)
            duplicates += len(result.duplicates)
        if advanced:
            uow.save_checkpoint(
                self.checkpoint,
                offsets={
                    **stored,
                    **{offsets_key(tp.topic, tp.partition): o for tp, o in advanced.items()},
                },
            )
        return advanced, appended, duplicates, dead, skipped, reseek

    def _commit_hint(self, advanced: Mapping[TopicPartition, int]) -> None:
        """Tell Kafka too (lag tools read it); failures are harmless and ignored."""
        offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in advanced.items()}
        try:
            self.consumer.commit_async(offsets, callback=_ignore_commit_result)
        except (KafkaError, OSError, AssertionError) as exc:
            log.debug("Kafka offset commit failed (hint only): %s", exc)

    def _rewind(self, polled: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """After a failed transaction: read again from the offsets the database holds."""
        self.stats.store_failures += 1
        metrics.STORE_OUTAGES.inc()
        assignment = self.consumer.assignment()
        for tp in polled:
            if tp not in assignment:
                continue
            if tp in self._stored:
                self._seek(tp, self._stored[tp])
            else:
                self._unseeked.add(tp)

    def _broker_lost(self, stop_event: threading.Event, exc: BaseException) -> None:
        """Wait before polling a broker that failed a poll again (backing off as for the
        store); counted in ``broker_failures``."""
        self._failures += 1
        self.stats.broker_failures += 1
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (self._failures - 1))
        log.warning("broker unreachable (%s): retrying in %.1fs", exc, delay)
        stop_event.wait(delay)

    def _backoff(self, stop_event: threading.Event, exc: BaseException) -> None:
        """Pause every partition, keep the group membership alive, wait, resume."""
        self._failures += 1
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (self._failures - 1))
        log.warning("store unavailable (%s): retrying in %.1fs", exc, delay)
        paused = set(self.consumer.assignment())
        self.consumer.pause(*paused)
        deadline = time.monotonic() + delay
        while not stop_event.is_set() and time.monotonic() < deadline:
            # paused partitions return nothing; poll keeps heartbeats and rebalances going
            remaining_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
            try:
                self.consumer.poll(timeout_ms=min(200, remaining_ms) or 1)
            except (KafkaError, OSError):  # the broker gone too: the next poll reconnects
                stop_event.wait(min(0.2, remaining_ms / 1000))
        self.consumer.resume(*(paused & self.consumer.assignment()))
        if self._unseeked:
            self.consumer.pause(*self._unseeked)

    def _update_lag(self) -> None:
        now = time.monotonic()
        if now < self._lag_at:
            return
        self._lag_at = now + self.lag_interval
        for tp in self.consumer.assignment():
            high = self.consumer.highwater(tp)
            stored = self._stored.get(tp)
            if high is not None and stored is not None:
                metrics.INGEST_LAG.labels(tp.topic, str(tp.partition)).set(max(0, high - stored))

    def close(self) -> None:
        """Leave the group (so the others rebalance at once) and close the client."""
        committed = {tp: o for tp, o in self._stored.items() if o is not None}
        if committed:
            try:
                self.consumer.commit(
                    {tp: OffsetAndMetadata(o, "", -1) for tp, o in committed.items()}
                )
            except (KafkaError, OSError, AssertionError) as exc:
                log.debug("final Kafka offset commit failed (hint only): %s", exc)
        self.consumer.close()


def _ignore_commit_result(_offsets: object, response: object) -> None:
    if isinstance(response, Exception):
        log.debug("Kafka offset commit failed (hint only): %s", response)


def run_ingest(
    store: EventStore,
    bootstrap: str,
    topic: str = DEFAULT_TOPIC,
    group: str = DEFAULT_GROUP,
    stop_event: threading.Event | None = None,
    *,
    checkpoint: str | None = None,
    partitions: Sequence[int] | None = None,
    max_messages: int | None = None,
    idle_timeout: float | None = None,
    metrics_port: int = 0,
    on_batch: Callable[[IngestStats], None] | None = None,
    **kafka_overrides: Any,
) -> IngestStats:
    """Run the ingest consumer until ``stop_event`` is set; returns its counters.

    ``kafka_overrides`` go to :class:`kafka.KafkaConsumer` on top of
    :func:`consumers.kafka_settings.consumer_config` (e.g. ``max_poll_records``,
    ``session_timeout_ms``, SASL options).
    """
    metrics.serve_metrics(metrics_port)
    consumer = IngestConsumer(
        store,
        bootstrap,
        topic=topic,
        group=group,
        checkpoint=checkpoint,
        partitions=partitions,
        **kafka_overrides,
    )
    try:
        return consumer.run(
            stop_event or threading.Event(),
            max_messages=max_messages,
            idle_timeout=idle_timeout,
            on_batch=on_batch,
        )
    finally:
        consumer.close()
