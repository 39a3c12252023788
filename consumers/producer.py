"""Publishing events to Kafka without ever losing or reordering them.

Watchers and the API publish envelopes here. Each event becomes one Kafka
message (``docs/wire-format.md``): value = canonical JSON, key = the stream's
identity, so a stream's events share a partition and keep their order.

When the broker cannot be reached, the events go to a durable local
:class:`~consumers.spool.Spool` instead, and every later publish queues behind
it until the spool has drained, in its original order, to a broker that is back.
Delivery is therefore at-least-once (a message acknowledged just before a
failure may be sent again); the store's idempotent append makes that harmless.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from consumers import metrics
from consumers.kafka_settings import DEFAULT_TOPIC, message_key, producer_config
from consumers.spool import DEFAULT_MAX_BYTES, DEFAULT_MAX_RECORDS, Spool, SpooledRecord, SpoolFull
from ledger.envelopes import Envelope

__all__ = ["EventPublisher", "PublishResult", "SpoolFull", "records_for"]

log = logging.getLogger(__name__)

SPOOL_FILE = "producer-spool.sqlite3"


@dataclass(frozen=True, slots=True)
class PublishResult:
    """``sent``: acknowledged by Kafka in this call; ``spooled``: written to the spool."""

    sent: int
    spooled: int
    drained: int = 0


def records_for(envelopes: Iterable[Envelope], topic: str = DEFAULT_TOPIC) -> list[SpooledRecord]:
    """The Kafka messages of ``envelopes`` (wire format), in order."""
    return [SpooledRecord(topic, message_key(e), e.to_json()) for e in envelopes]


class EventPublisher:
    """Publishes envelopes with ``acks='all'``; spools them while the broker is unreachable.

    Thread-safe. After a failure the broker is not tried again for a backoff
    period (1 s doubling to ``max_backoff``); meanwhile :meth:`publish` spools
    straight away instead of blocking the caller. Call :meth:`drain` periodically
    (the service's scheduler does) so a spool empties even when no new events come.
    """

    def __init__(
        self,
        bootstrap: str | None,
        *,
        data_dir: str | Path,
        topic: str = DEFAULT_TOPIC,
        max_spool_bytes: int = DEFAULT_MAX_BYTES,
        max_spool_records: int = DEFAULT_MAX_RECORDS,
        chunk: int = 5_000,
        max_backoff: float = 30.0,
        flush_timeout: float | None = None,
        **kafka_overrides: Any,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.chunk = chunk
        self.max_backoff = max_backoff
        self._config = producer_config(**kafka_overrides)
        # flush waits at most as long as a send may take before Kafka reports it failed
        self.flush_timeout = (
            flush_timeout
            or (self._config["delivery_timeout_ms"] + self._config["max_block_ms"]) / 1000.0
        )
        self.spool = Spool(
            Path(data_dir) / SPOOL_FILE, max_bytes=max_spool_bytes, max_records=max_spool_records
        )
        self._producer: KafkaProducer | None = None
        self._lock = threading.RLock()
        self._failures = 0
        self._retry_at = 0.0

    # -- public API ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Events waiting in the spool."""
        return len(self.spool)

    @property
    def broker_available(self) -> bool:
        """False while in backoff after a failed send."""
        return self._failures == 0

    def publish(self, envelopes: Iterable[Envelope]) -> PublishResult:
        """Send ``envelopes`` in order, or spool them; raises :class:`SpoolFull` if both fail."""
        return self.publish_records(records_for(envelopes, self.topic))

    def publish_records(self, records: Sequence[SpooledRecord]) -> PublishResult:
        """:meth:`publish` for ready-made messages (tests use it for poison messages)."""
        with self._lock:
            drained = self._drain_locked(force=False) if len(self.spool) else 0
            if len(self.spool) or time.monotonic() < self._retry_at:
                self._spool(records, accepted=0)
                return PublishResult(0, len(records), drained)
            acked = self._send(records)
            if acked < len(records):
                self._spool(records[acked:], accepted=acked)
            return PublishResult(acked, len(records) - acked, drained)

    def drain(self, *, force: bool = True) -> int:
        """Send spooled events, oldest first, until the spool is empty or the broker fails.

        Returns how many were acknowledged. ``force=False`` respects the backoff.
        """
        with self._lock:
            return self._drain_locked(force=force)

    def flush(self, timeout: float | None = None) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush(timeout=timeout)

    def close(self, *, drain: bool = True, timeout: float = 10.0) -> None:
        """Try a last drain, then close the Kafka client and the spool (which keeps its rows)."""
        with self._lock:
            if drain and len(self.spool) and self._failures == 0:
                self._drain_locked(force=True)
            self._drop_producer(timeout)
            self.spool.close()

    def __enter__(self) -> EventPublisher:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _spool(self, records: Sequence[SpooledRecord], *, accepted: int) -> None:
        try:
            self.spool.append(records)
        except SpoolFull as exc:
            exc.accepted = accepted
            log.error("%s", exc)
            raise
        finally:
            metrics.PRODUCER_SPOOLED.set(len(self.spool))

    def _drain_locked(self, *, force: bool) -> int:
        drained = 0
        while len(self.spool):
            if not force and time.monotonic() < self._retry_at:
                break
            batch = self.spool.peek(self.chunk)
            acked = self._send([record for _, record in batch])
            if acked:
                self.spool.remove_through(batch[acked - 1][0])
                drained += acked
            if acked < len(batch):
                break
        metrics.PRODUCER_SPOOLED.set(len(self.spool))
        if drained:
            log.info("drained %d spooled events to Kafka, %d left", drained, len(self.spool))
        return drained

    def _client(self) -> KafkaProducer | None:
        if self._producer is None:
            if not self.bootstrap:
                return None
            try:
                self._producer = KafkaProducer(bootstrap_servers=self.bootstrap, **self._config)
            except (KafkaError, OSError) as exc:
                log.warning("Kafka at %s unreachable: %s", self.bootstrap, exc)
                return None
        return self._producer

    def _send(self, records: Sequence[SpooledRecord]) -> int:
        """Send and wait; the length of the acknowledged prefix of ``records``."""
        producer = self._client()
        if producer is None:
            self._failed()
            return 0
        futures = []
        try:
            for record in records:
                futures.append(producer.send(record.topic, key=record.key, value=record.value))
            producer.flush(timeout=self.flush_timeout)
        except (KafkaError, OSError) as exc:
            log.warning("sending to Kafka failed: %s", exc)
        acked = 0
        for future in futures:
            if not future.succeeded():
                break
            acked += 1
        if acked < len(records):
            failure = next((f.exception for f in futures[acked:] if f.failed()), None)
            log.warning(
                "Kafka acknowledged %d of %d events (%s); spooling the rest",
                acked,
                len(records),
                failure,
            )
            # a client that failed may hold half-sent batches: start clean next time
            self._drop_producer(0.0)
            self._failed()
        else:
            self._failures = 0
            self._retry_at = 0.0
        return acked

    def _failed(self) -> None:
        self._failures += 1
        delay = min(self.max_backoff, 2.0 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay

    def _drop_producer(self, timeout: float) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=timeout)
            except Exception:  # closing a broken client must not mask the real error
                log.debug("closing the Kafka producer failed", exc_info=True)
            self._producer = None
