"""Redelivery is harmless: duplicates on the topic, and re-reads from any offset, add nothing."""

from __future__ import annotations

import threading
import uuid

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from consumers.ingest import IngestConsumer, run_ingest
from consumers.kafka_settings import checkpoint_name
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce, stored_ids

FAST_GROUP = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}
N = 2_000


def test_same_messages_twice_and_restarts_from_any_offset_add_nothing(
    store: PostgresEventStore, bootstrap: str, topic: str
) -> None:
    events = make_events(N, streams=50)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, events)
    first = run_ingest(
        store, bootstrap, topic, group, max_messages=N, idle_timeout=30, **FAST_GROUP
    )
    assert first.appended == N

    # the producer retried: every message is on the topic a second time
    produce(bootstrap, topic, events)
    second = run_ingest(
        store, bootstrap, topic, group, max_messages=N, idle_timeout=30, **FAST_GROUP
    )
    assert (second.messages, second.appended, second.duplicates) == (N, 0, N)
    assert sorted(stored_ids(store)) == sorted(e.event_id for e in events)

    # Kafka's committed offsets lost (rewound to 0): the stored offsets win, nothing re-read
    rewind = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in range(4)]
    rewind.commit({tp: OffsetAndMetadata(0, "", -1) for tp in partitions})
    rewind.close()
    third = run_ingest(store, bootstrap, topic, group, idle_timeout=2, **FAST_GROUP)
    assert third.messages == 0

    # a consumer positioned by Kafka's hint (here: the beginning) skips what the store has
    zombie = IngestConsumer(
        store, bootstrap, topic=topic, group=group, partitions=range(4), **FAST_GROUP
    )
    zombie.consumer.seek_to_beginning()
    try:
        stats = zombie.run(threading.Event(), max_messages=2 * N, idle_timeout=3)
    finally:
        zombie.close()
    assert (stats.messages, stats.skipped, stats.appended) == (2 * N, 2 * N, 0)

    # a brand-new checkpoint (no stored offsets) re-reads everything and appends nothing
    fresh = run_ingest(
        store,
        bootstrap,
        topic,
        f"g-{uuid.uuid4().hex[:8]}",
        max_messages=2 * N,
        idle_timeout=30,
        **FAST_GROUP,
    )
    assert (fresh.appended, fresh.duplicates) == (0, 2 * N)
    assert len(stored_ids(store)) == N
    with store.transaction() as uow:
        assert sum(uow.load_checkpoint(checkpoint_name(group)).offsets.values()) == 2 * N
