"""Ingest's metrics after N events through the real Tansu broker, scraped over HTTP:
every event counted once as ingested, and once as a duplicate when redelivered."""

from __future__ import annotations

import uuid
from typing import Any

from consumers.ingest import run_ingest
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce
from tests.support.metrics import scrape

FAST_GROUP: dict[str, Any] = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}
N = 300


def test_ingested_and_duplicate_counts(
    store: PostgresEventStore, bootstrap: str, topic: str, metrics_url: str
) -> None:
    events = make_events(N, streams=10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    before = scrape(metrics_url)

    def delta(name: str) -> float:
        return scrape(metrics_url).get((name, ()), 0.0) - before.get((name, ()), 0.0)

    produce(bootstrap, topic, events)
    first = run_ingest(
        store, bootstrap, topic, group, max_messages=N, idle_timeout=30, **FAST_GROUP
    )
    assert first.appended == N
    assert delta("dlc_ingest_events_total") == N
    assert delta("dlc_ingest_duplicate_events_total") == 0
    assert delta("dlc_ingest_batches_total") >= 1
    assert delta("dlc_ingest_store_transaction_seconds_count") == delta("dlc_ingest_batches_total")

    produce(bootstrap, topic, events)  # a producer's retry: all of them again
    run_ingest(store, bootstrap, topic, group, max_messages=N, idle_timeout=30, **FAST_GROUP)
    assert delta("dlc_ingest_events_total") == N
    assert delta("dlc_ingest_duplicate_events_total") == N
