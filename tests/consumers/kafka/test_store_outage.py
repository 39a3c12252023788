"""PostgreSQL unavailable mid-batch: the consumer backs off and rewinds; nothing lost or doubled."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
from sqlalchemy.engine import make_url

from consumers.ingest import IngestConsumer, IngestStats
from ledger.store.postgres import PostgresEventStore
from tests.support.databases import ADMIN_URL
from tests.support.kafka import make_events, produce, stored_ids, streams_in_order

N = 30_000


def terminate_backends(database: str, *, down_for: float = 0.0) -> int:
    """Kill every session on ``database``; with ``down_for``, refuse new ones that long."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        if down_for:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
        if down_for:
            time.sleep(down_for)
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
    return len(rows)


def test_connections_killed_mid_batch_lose_and_double_nothing(
    store: PostgresEventStore, database_url: str, bootstrap: str, topic: str
) -> None:
    database = make_url(database_url).database
    assert database is not None
    events = make_events(N, streams=300)
    produce(bootstrap, topic, events)
    # a store of its own, so the test's probes never share the consumer's pool
    consumer_store = PostgresEventStore(database_url)
    consumer = IngestConsumer(
        consumer_store,
        bootstrap,
        topic=topic,
        group=f"g-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
        max_poll_records=500,
        backoff_initial=0.1,
        backoff_max=0.5,
    )
    stop = threading.Event()
    result: list[IngestStats] = []
    thread = threading.Thread(target=lambda: result.append(consumer.run(stop)))
    thread.start()
    try:
        killed = 0
        deadline = time.monotonic() + 120
        for threshold, down_for in ((N // 10, 0), (N // 4, 0), (N // 2, 1.5), (3 * N // 4, 0)):
            while store.head_position() < threshold:
                assert time.monotonic() < deadline, "ingest stalled"
                time.sleep(0.01)
            killed += terminate_backends(database, down_for=down_for)
        while store.head_position() < N:
            assert time.monotonic() < deadline, f"stuck at {store.head_position()}"
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(30)
        consumer.close()
        consumer_store.close()

    assert killed >= 4
    assert result and result[0].store_failures >= 1
    ids = stored_ids(store)
    assert len(ids) == N
    assert set(ids) == {e.event_id for e in events}
    for stream, sequence in streams_in_order(store).items():
        assert sequence == sorted(sequence), stream
    assert store.verify().ok
