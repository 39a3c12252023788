"""When one machine stops being enough (``python -m bench scale``): ingest and the projector
scaled out as processes on this machine, measured per process and per core.

- **Ingest**: ``--events`` replay-shaped events (:func:`bench.project.replay_events`: job
  lifecycles, pods, nodes) are produced once to a topic of ``--partitions`` (8) on an
  embedded Tansu broker; then for each consumer count of ``--consumers`` (1, 2, 4) a fresh
  database is filled by that many ``dlc-ledger ingest`` processes of one consumer group.
  The rate is the events over the span of their ``recorded_at`` (the group's join and the
  idle exit are not counted); CPU is the ingest processes' own (``wait4``) plus
  PostgreSQL's (all its processes on this machine, :func:`bench.project._server_cpu`).
- **Projector lanes**: on the store the single consumer filled, every registered
  projection is built from position 0 by ``--lanes`` (1, 2, 4) lane processes
  (:func:`consumers.lanes.catch_up_lanes`, as ``dlc-ledger project --workers N``), the
  projections reset between runs.

Per core = events per CPU-second (client + PostgreSQL): what a core buys, whatever the
process count. The machine has 2 cores shared by the client processes, PostgreSQL and the
broker, so past 2 processes the figures show contention, not scale-out; that is the
point (docs/operations.md turns them into a capacity model). The last line is JSON.
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
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from sqlalchemy import text

from bench.databases import scratch_database
from bench.project import _children_cpu, _server_cpu, replay_events
from consumers.kafka_settings import message_key, producer_config
from consumers.lanes import catch_up_lanes
from consumers.projector import DEFAULT_PAGE, Projector
from dlc_ledger.wiring.broker import EmbeddedBroker
from dlc_ledger.wiring.context import store_opener
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import upgrade
from projections.registry import all_projections

__all__ = ["main"]


def _produce(bootstrap: str, topic: str, count: int, window: int) -> float:
    config = producer_config(max_in_flight_requests_per_connection=5, linger_ms=20)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    started = time.perf_counter()
    for envelope in replay_events(count, window=window):
        producer.send(topic, key=message_key(envelope), value=envelope.to_json())
    producer.flush()
    producer.close()
    return time.perf_counter() - started


def _ingest(
    url: str, bootstrap: str, topic: str, consumers: int, workdir: Path, idle: float
) -> dict[str, Any]:
    """``consumers`` ingest processes of one group until each is idle; their figures."""
    group = f"scale-{uuid.uuid4().hex[:8]}"
    procs = []
    server = _server_cpu()
    for n in range(consumers):
        log = (workdir / f"ingest-{consumers}-{n}.log").open("wb")
        argv = [
            *(sys.executable, "-m", "dlc_ledger.cli.ingest", "--database-url", url),
            *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
            *(
                "--idle-exit",
                str(idle),
                "--stats-file",
                str(workdir / f"stats-{consumers}-{n}.json"),
            ),
        ]
        procs.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log))
    cpu = 0.0
    for proc, log in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        log.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"ingest failed; see {log.name}")
        cpu += usage.ru_utime + usage.ru_stime
    server = _server_cpu() - server
    engine = make_engine(url)
    with engine.connect() as conn:
        stored, span = conn.execute(
            text(
                "SELECT count(*), extract(epoch FROM max(recorded_at) - min(recorded_at)) "
                "FROM events"
            )
        ).one()
    engine.dispose()
    span = float(span or 0.0)
    rate = stored / span if span else 0.0
    return {
        "consumers": consumers,
        "stored": stored,
        "seconds": round(span, 1),
        "events_per_s": round(rate),
        "per_process": round(rate / consumers),
        "ingest_cpu_s": round(cpu, 1),
        "postgres_cpu_s": round(server, 1),
        # the idle exit's wait costs no CPU: CPU is the work itself
        "per_core": round(stored / (cpu + server)) if cpu + server else None,
    }


def _lanes(url: str, lanes: int, events: int) -> dict[str, Any]:
    store = PostgresEventStore(url)
    projector = Projector(store, all_projections())
    for projection in projector.projections:
        projector.reset(projection)
    store.close()
    started, children, server = time.perf_counter(), _children_cpu(), _server_cpu()
    catch_up_lanes(store_opener(url), all_projections(), workers=lanes, page_size=DEFAULT_PAGE)
    elapsed = time.perf_counter() - started
    children, server = _children_cpu() - children, _server_cpu() - server
    rate = events / elapsed
    return {
        "lanes": lanes,
        "seconds": round(elapsed, 1),
        "events_per_s": round(rate),
        "per_process": round(rate / lanes),
        "lanes_cpu_s": round(children, 1),
        "postgres_cpu_s": round(server, 1),
        "per_core": round(events / (children + server)) if children + server else None,
    }


def _counts(text_: str) -> list[int]:
    return [int(part) for part in text_.split(",")]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scale")
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--consumers", type=_counts, default=[1, 2, 4])
    parser.add_argument("--lanes", type=_counts, default=[1, 2, 4])
    parser.add_argument("--window", type=int, default=2_000, help="jobs running at once")
    parser.add_argument(
        "--idle-exit", type=float, default=12.0, help="an ingest process exits this idle"
    )
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores", flush=True)
    results: dict[str, Any] = {"events": args.events, "partitions": args.partitions}
    with tempfile.TemporaryDirectory(prefix="dlc-bench-scale-") as tmp:
        workdir = Path(tmp)
        topic = f"scale-{uuid.uuid4().hex[:8]}"
        with EmbeddedBroker(workdir / "broker", topic=topic, partitions=args.partitions) as broker:
            seconds = _produce(broker.bootstrap, topic, args.events, args.window)
            print(f"produced {args.events:,} events in {seconds:.1f} s", flush=True)
            ingest: list[dict[str, Any]] = []
            lanes: list[dict[str, Any]] = []
            for consumers in args.consumers:
                with scratch_database("dlcbench_scale") as url:
                    engine = make_engine(url)
                    upgrade(engine)
                    engine.dispose()
                    row = _ingest(url, broker.bootstrap, topic, consumers, workdir, args.idle_exit)
                    ingest.append(row)
                    print(
                        f"ingest x{consumers}: {row['stored']:,} events in {row['seconds']} s, "
                        f"{row['events_per_s']:,}/s ({row['per_process']:,}/s per process, "
                        f"{row['per_core']:,} per CPU-second; CPU ingest "
                        f"{row['ingest_cpu_s']} s, PostgreSQL {row['postgres_cpu_s']} s)",
                        flush=True,
                    )
                    if row["stored"] != args.events:
                        print(f"expected {args.events} events", file=sys.stderr)
                        return 1
                    if not lanes:  # on the first store filled: the projector lanes
                        for count in args.lanes:
                            lane = _lanes(url, count, args.events)
                            lanes.append(lane)
                            print(
                                f"projector lanes x{count}: {lane['seconds']} s, "
                                f"{lane['events_per_s']:,} events/s ({lane['per_process']:,}/s "
                                f"per process, {lane['per_core']:,} per CPU-second; CPU lanes "
                                f"{lane['lanes_cpu_s']} s, PostgreSQL {lane['postgres_cpu_s']} s)",
                                flush=True,
                            )
                        results["lanes"] = lanes
            results["ingest"] = ingest
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
