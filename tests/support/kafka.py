"""Event builders and store probes shared by the Kafka tests."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from sqlalchemy import text

from consumers.kafka_settings import message_key
from ledger.envelopes import Envelope, make_envelope
from ledger.events import JobQueued
from ledger.ids import deterministic_id
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "consume_all",
    "make_events",
    "produce",
    "sequence_of",
    "stored_ids",
    "streams_in_order",
]

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def make_events(
    n: int, *, streams: int = 200, run: str | None = None, start: int = 0
) -> list[Envelope]:
    """``n`` JobQueued events over ``streams`` streams; ``reason`` holds the sequence number."""
    run = run or uuid.uuid4().hex
    events = []
    for i in range(start, start + n):
        uid = f"job-{i % streams}"
        at = EPOCH + timedelta(milliseconds=i)
        events.append(
            make_envelope(
                JobQueued(job_uid=uid, reason=str(i)),
                event_id=deterministic_id("kafka-test", run, str(i)),
                stream=f"job/{uid}",
                occurred_at=at,
                observed_at=at,
                source="kube-watcher/test",
            )
        )
    return events


def sequence_of(envelope: Envelope) -> int:
    return int(envelope.data["reason"])


def produce(
    bootstrap: str, topic: str, messages: list[Envelope] | list[tuple[bytes, bytes]]
) -> None:
    """Plain kafka-python produce (acks=all), keys per the wire format."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        batch_size=256 * 1024,
        max_in_flight_requests_per_connection=1,
        max_request_size=2_000_000,
    )
    try:
        for message in messages:
            if isinstance(message, Envelope):
                producer.send(topic, key=message_key(message), value=message.to_json())
            else:
                producer.send(topic, key=message[0], value=message[1])
        producer.flush(timeout=60)
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    """Every message of ``topic`` (partition by partition, then merged), without a group."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(timeout * 1000),
    )
    partitions = consumer.partitions_for_topic(topic) or set()
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    consumer.seek_to_beginning()
    values = []
    for record in consumer:
        values.append(record.value)
        if len(values) >= expected:
            break
    consumer.close()
    return values


def stored_ids(store: PostgresEventStore) -> list[uuid.UUID]:
    with store.engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT event_id FROM events"))]


def streams_in_order(store: PostgresEventStore) -> dict[str, list[int]]:
    """Per stream, the sequence numbers of its events in stored version order."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT stream, data->>'reason' FROM events ORDER BY stream, version")
        ).all()
    out: dict[str, list[int]] = defaultdict(list)
    for stream, reason in rows:
        out[stream].append(int(reason))
    return dict(out)
