"""Store append throughput: our batched COPY path, one event per transaction, and the
``eventsourcing`` library's PostgreSQL recorder on the same database, in one run."""

from __future__ import annotations

import argparse
import json
import time
import uuid

import orjson
from sqlalchemy.engine import make_url

from bench.databases import scratch_database
from bench.events import occupancy_started
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade


def _events(count: int, salt: int) -> list:  # type: ignore[type-arg]
    return [occupancy_started(salt + n, job=f"job-{(salt + n) // 4}") for n in range(count)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench store")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument(
        "--single", type=int, default=5_000, help="events for the per-transaction path"
    )
    parser.add_argument("--batch", type=int, default=1_000)
    args = parser.parse_args(argv)

    with scratch_database() as url:
        engine = make_engine(url)
        upgrade(engine)
        store = PostgresEventStore(engine)

        batched = _events(args.events, 0)
        started = time.perf_counter()
        for i in range(0, len(batched), args.batch):
            store.append(batched[i : i + args.batch])
        batched_rate = len(batched) / (time.perf_counter() - started)
        print(f"store batched: {batched_rate:,.0f} events/s", flush=True)

        singles = _events(args.single, 10_000_000)
        started = time.perf_counter()
        for event in singles:
            store.append([event])
        single_rate = len(singles) / (time.perf_counter() - started)
        print(f"store one per transaction: {single_rate:,.0f} events/s", flush=True)
        store.close()

        from eventsourcing.persistence import StoredEvent
        from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

        parsed = make_url(url)
        datastore = PostgresDatastore(
            dbname=parsed.database or "",
            host=parsed.host or "127.0.0.1",
            port=parsed.port or 5432,
            user=parsed.username or "",
            password=parsed.password or "",
        )
        recorder = PostgresApplicationRecorder(datastore, events_table_name="es_events")
        recorder.create_table()
        stored = [
            StoredEvent(
                originator_id=uuid.uuid5(uuid.NAMESPACE_URL, e.stream),
                originator_version=n,
                topic=e.type,
                state=orjson.dumps(e.to_wire()),
            )
            for n, e in enumerate(_events(args.events, 20_000_000))
        ]
        started = time.perf_counter()
        for i in range(0, len(stored), args.batch):
            recorder.insert_events(stored[i : i + args.batch])
        es_rate = len(stored) / (time.perf_counter() - started)
        print(f"eventsourcing batched: {es_rate:,.0f} events/s", flush=True)
        datastore.close()

    print(
        json.dumps(
            {
                "store_append_events_per_s": round(batched_rate),
                "store_single_events_per_s": round(single_rate),
                "eventsourcing_batched_events_per_s": round(es_rate),
                "store_vs_eventsourcing_ratio": round(batched_rate / es_rate, 2),
            }
        )
    )
    return 0
