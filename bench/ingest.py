"""Ingest throughput: Kafka -> validated -> event store, against kafka-python's raw consume rate.

Produces N realistic occupancy events to a fresh topic on an embedded Tansu
broker, then (1) runs the real ingest consumer (``python -m dlc_ledger.cli.ingest``,
a separate process so its peak RSS is its own) into a fresh migrated database,
and (2) consumes the same topic with a bare kafka-python consumer using the same
client settings and no database. Rates are measured from the first message to
the last commit, so the group join (~3 s on Tansu) is not counted.

Last stdout line: JSON with ``ingest_events_per_s``, ``raw_consume_events_per_s``,
``ingest_vs_raw_ratio`` and ``ingest_peak_rss_mb``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from bench.databases import scratch_database
from consumers.kafka_settings import consumer_config, message_key, producer_config
from dlc_ledger.wiring.broker import EmbeddedBroker
from ledger.envelopes import Envelope, make_envelope
from ledger.events import OccupancyStarted
from ledger.ids import fact_event_id
from ledger.store.engines import make_engine
from migrations.runner import upgrade

__all__ = ["main"]

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
PARTITIONS = 4


def occupancy(n: int, run: str) -> Envelope:
    job = f"job-{n % 20_000}"
    at = EPOCH + timedelta(seconds=n)
    return make_envelope(
        OccupancyStarted(
            occupancy_id=f"pod-{n}",
            job_uid=job,
            pod_uid=f"pod-{n}",
            pod_name=f"openb-pod-{n:07d}",
            node=f"openb-node-{n % 1523:04d}",
            mgpu=1000,
            cpu_milli=8000,
            memory_mib=16384,
            workspace=f"ws-{n % 17}",
            started_at=at,
        ),
        event_id=fact_event_id(run, "Pod", f"pod-{n}", "started"),
        stream=f"job/{job}",
        occurred_at=at,
        observed_at=at,
        source="kube-watcher/bench",
    )


def produce(bootstrap: str, topic: str, count: int) -> float:
    run = uuid.uuid4().hex
    config = producer_config(max_in_flight_requests_per_connection=5, linger_ms=20)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    started = time.perf_counter()
    chunk = 20_000
    for base in range(0, count, chunk):
        for n in range(base, min(count, base + chunk)):
            envelope = occupancy(n, run)
            producer.send(topic, key=message_key(envelope), value=envelope.to_json())
    producer.flush()
    producer.close()
    return time.perf_counter() - started


def raw_consume(bootstrap: str, topic: str, count: int) -> float:
    """kafka-python alone, same settings, no validation, no database; returns events/s."""
    config = consumer_config()
    max_records = config.pop("max_poll_records")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **config)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    seen = 0
    first: float | None = None
    deadline = time.monotonic() + 600
    while seen < count and time.monotonic() < deadline:
        polled = consumer.poll(timeout_ms=500, max_records=max_records)
        if polled and first is None:
            first = time.perf_counter()
        for records in polled.values():
            for record in records:
                _ = record.value  # touch it, as the consumer would
            seen += len(records)
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return seen / elapsed if elapsed > 0 else 0.0


def ingest(
    database_url: str, bootstrap: str, topic: str, count: int, workdir: Path
) -> dict[str, Any]:
    stats_file = workdir / "ingest-stats.json"
    argv = [
        sys.executable,
        "-m",
        "dlc_ledger.cli.ingest",
        "--database-url",
        database_url,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--group",
        f"bench-{uuid.uuid4().hex[:8]}",
        "--max-messages",
        str(count),
        "--idle-exit",
        "30",
        "--stats-file",
        str(stats_file),
    ]
    with (workdir / "ingest.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed ({proc.returncode}); see {workdir / 'ingest.log'}")
    stats: dict[str, Any] = json.loads(stats_file.read_text())
    stats["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux: KiB
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench ingest")
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    count: int = args.events

    with tempfile.TemporaryDirectory(prefix="dlc-bench-ingest-") as tmp, scratch_database() as url:
        workdir = Path(tmp)
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        with EmbeddedBroker(workdir / "broker", topic=topic, partitions=PARTITIONS) as broker:
            bootstrap = broker.bootstrap
            produce_s = produce(bootstrap, topic, count)
            print(f"produced {count} events in {produce_s:.1f}s ({count / produce_s:,.0f}/s)")
            stats = ingest(url, bootstrap, topic, count, workdir)
            ingest_rate = stats["appended"] / stats["busy_seconds"]
            print(
                f"ingested {stats['appended']} events in {stats['busy_seconds']:.1f}s"
                f" ({ingest_rate:,.0f}/s), peak RSS {stats['peak_rss_mb']:.0f} MB"
            )
            raw_rate = raw_consume(bootstrap, topic, count)
            print(f"raw kafka-python consume: {raw_rate:,.0f}/s")
    if stats["appended"] != count:
        print(f"expected {count} new events, got {stats['appended']}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "events": count,
                "ingest_events_per_s": round(ingest_rate),
                "raw_consume_events_per_s": round(raw_rate),
                "ingest_vs_raw_ratio": round(ingest_rate / raw_rate, 3),
                "ingest_peak_rss_mb": round(stats["peak_rss_mb"], 1),
                "produce_events_per_s": round(count / produce_s),
            }
        )
    )
    return 0
