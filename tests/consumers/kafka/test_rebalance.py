"""Two consumers share four partitions; one leaves mid-stream: no loss, no duplicate, order kept."""

from __future__ import annotations

import threading
import time
import uuid

from consumers.ingest import IngestConsumer, IngestStats
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce, stored_ids, streams_in_order

N = 20_000
SETTINGS = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300, "max_poll_records": 500}


def slow(_stats: IngestStats) -> None:
    time.sleep(0.03)  # keep the stream going long enough for the hand-over to happen mid-way


def test_two_consumers_one_leaves_mid_stream(
    store: PostgresEventStore, bootstrap: str, topic: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [
        IngestConsumer(store, bootstrap, topic=topic, group=group, **SETTINGS) for _ in range(2)
    ]
    stops = [threading.Event(), threading.Event()]
    results: dict[int, IngestStats] = {}

    def run(i: int) -> None:
        try:
            results[i] = consumers[i].run(stops[i], on_batch=slow)
        finally:
            consumers[i].close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while not all(len(c.consumer.assignment()) == 2 for c in consumers):
        assert time.monotonic() < deadline, "the group never split the partitions 2 + 2"
        time.sleep(0.05)

    events = make_events(N, streams=200)
    produce(bootstrap, topic, events)
    while store.head_position() < N // 4:
        assert time.monotonic() < deadline + 60
        time.sleep(0.02)
    stops[1].set()  # consumer 1 leaves; consumer 0 takes over its partitions
    threads[1].join(30)
    while store.head_position() < N:
        assert time.monotonic() < deadline + 90, f"stuck at {store.head_position()}"
        time.sleep(0.05)
    time.sleep(0.5)
    stops[0].set()
    threads[0].join(30)

    assert results[0].messages > 0 and results[1].messages > 0
    ids = stored_ids(store)
    assert len(ids) == N
    assert set(ids) == {e.event_id for e in events}
    for stream, sequence in streams_in_order(store).items():
        assert sequence == sorted(sequence), stream
