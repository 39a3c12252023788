"""What partitioning ``events`` by month would cost and give (``python -m bench partitions``).

``events`` is one append-only table that grows without end; partitioning it by the month an
event was recorded would let an old month be archived by detaching a partition, and a
window by that month read only its partitions. The price: PostgreSQL requires the partition
key in every unique constraint, so neither ``event_id`` nor ``(stream, version)`` could stay
unique across the table; ``monthly`` models the fix, a non-partitioned side table
``event_keys (event_id PRIMARY KEY, stream, version, position, UNIQUE (stream, version))``
written with every append. Both designs are built as copies of the store's ``events`` in
schema ``bench_partitions`` of the store database (dropped at the end; ``events`` is only
read): ``flat`` (as today: PK position, UNIQUE event_id, UNIQUE (stream, version)) and
``monthly`` (RANGE partitions per calendar month, PK (position, key), a non-unique index on
(stream, version)). Neither has an index on the key, as ``events`` has none on recorded_at.

The partition key ``recorded_month_at`` is a copy of ``occurred_at``: the bench store's
events were all appended within minutes, so its ``recorded_at`` does not spread, while
``occurred_at`` (cluster time) spans months. It stands in for ``recorded_at``, which in
production is (almost) monotonic in position. ``occurred_at`` is not: the rater's
transactions (about 30% of the store), appended after every lifecycle fact when the store
was built, carry the cluster time of their period, so here each month's partition holds two
ranges of positions (its lifecycle facts and a share of the tail) where live it would hold
one.

Figures (median of repetitions where there are several): the bulk copy of every event
(events/s; monthly includes event_keys); appends at the head (20 transactions of 1,000 new
events in the newest month, each reading the head then COPYing, as the store's append does;
monthly also writes event_keys); one stream's events by (stream, version) for 500 streams
(no pruning on stream: monthly probes every partition's index); a catch-up page of 1,000
after 200 random positions; count and data size over a random day of the key (monthly
prunes to one partition); the chain walk, (position, hash) in position order (monthly merges
every partition's PK); retention, DETACH of the oldest month against a DELETE of the same
rows from flat (which leaves them for vacuum; event_keys keeps their ids so duplicates stay
refused); and the sizes. Read times include psycopg decoding the rows, as a reader pays it.
The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from bench.api_world import bench_store

__all__ = ["main"]

S = "bench_partitions"
KEY = "recorded_month_at"
COLUMNS = (
    "position, event_id, stream, version, type, schema_version, occurred_at, observed_at, "
    "recorded_at, source, causation_id, correlation_id, data, hash"
)
#: binary COPY types of COLUMNS and the key (data as jsonb's wire format: b"\x01" + text)
COPY_TYPES = [
    "int8", "uuid", "text", "int4", "text", "int4", "timestamptz", "timestamptz",
    "timestamptz", "text", "uuid", "uuid", "bytea", "bytea", "timestamptz",
]  # fmt: skip
DAY = f"{KEY} >= %s AND {KEY} < %s"
BATCHES, BATCH, STREAMS, PAGES, PAGE, DAYS = 20, 1_000, 500, 200, 1_000, 20


def _next_month(d: datetime) -> datetime:
    return d.replace(year=d.year + d.month // 12, month=d.month % 12 + 1)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed_ms(
    conn: psycopg.Connection[Any], query: str, params: list[tuple[Any, ...]]
) -> list[float]:
    out = []
    for args in params:
        started = time.perf_counter()
        conn.execute(query, args).fetchall()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _create(conn: psycopg.Connection[Any], months: list[datetime]) -> None:
    conn.execute(f"DROP SCHEMA IF EXISTS {S} CASCADE")
    conn.execute(f"CREATE SCHEMA {S}")
    conn.execute(
        f"CREATE TABLE {S}.flat (LIKE public.events, {KEY} timestamptz NOT NULL, "
        "PRIMARY KEY (position), UNIQUE (event_id), UNIQUE (stream, version))"
    )
    conn.execute(
        f"CREATE TABLE {S}.monthly (LIKE public.events, {KEY} timestamptz NOT NULL, "
        f"PRIMARY KEY (position, {KEY})) PARTITION BY RANGE ({KEY})"
    )
    conn.execute(f"CREATE INDEX ON {S}.monthly (stream, version)")
    for month in months:
        conn.execute(
            f"CREATE TABLE {S}.monthly_{month:%Y_%m} PARTITION OF {S}.monthly "
            f"FOR VALUES FROM ('{month.isoformat()}') TO ('{_next_month(month).isoformat()}')"
        )
    conn.execute(
        f"CREATE TABLE {S}.event_keys (event_id uuid PRIMARY KEY, stream text NOT NULL, "
        "version int NOT NULL, position bigint NOT NULL, UNIQUE (stream, version))"
    )


def _appends(
    conn: psycopg.Connection[Any], table: str, batches: list[list[tuple[Any, ...]]]
) -> float:
    """Median events/s of one transaction per batch: read the head, COPY the rows (and
    their keys into event_keys for ``monthly``)."""
    rates = []
    for rows in batches:
        started = time.perf_counter()
        with conn.transaction():
            conn.execute(f"SELECT position, hash FROM {S}.{table} ORDER BY position DESC LIMIT 1")
            with conn.cursor().copy(
                f"COPY {S}.{table} ({COLUMNS}, {KEY}) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(COPY_TYPES)
                for row in rows:
                    copy.write_row(row)
            if table == "monthly":
                with conn.cursor().copy(
                    f"COPY {S}.event_keys (event_id, stream, version, position) "
                    "FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["uuid", "text", "int4", "int8"])
                    for row in rows:
                        copy.write_row((row[1], row[2], row[3], row[0]))
        rates.append(len(rows) / (time.perf_counter() - started))
    return statistics.median(rates)


def _synthetic(
    conn: psycopg.Connection[Any], rng: random.Random, head: int, newest: datetime
) -> list[list[tuple[Any, ...]]]:
    """BATCHES batches of BATCH new events after ``head``: new ids, 100 new streams of ten
    versions per batch, type and data copied from random stored events, in the newest month."""
    picks = [rng.randint(1, head) for _ in range(BATCH)]
    samples = conn.execute(
        "SELECT type, data::text FROM events WHERE position = ANY(%s)", (picks,)
    ).fetchall()
    now = datetime.now(UTC)
    batches = []
    for b in range(BATCHES):
        rows = []
        for i in range(BATCH):
            kind, data = samples[(b * BATCH + i) % len(samples)]
            head += 1
            stream = f"bench/partitions/{b:02d}-{i // 10:03d}"
            rows.append(
                (head, uuid.uuid4(), stream, i % 10 + 1, kind, 1, newest, newest, now,
                 "bench/partitions", None, None, b"\x01" + data.encode(), rng.randbytes(32),
                 newest)
            )  # fmt: skip
        batches.append(rows)
    return batches


def _walk(conn: psycopg.Connection[Any], table: str) -> float:
    started = time.perf_counter()
    with conn.transaction(), conn.cursor(name=f"walk_{table}") as cur:
        cur.itersize = 10_000
        cur.execute(f"SELECT position, hash FROM {S}.{table} ORDER BY position")
        for _ in cur:
            pass
    return time.perf_counter() - started


def _size_mb(conn: psycopg.Connection[Any], table: str) -> float:
    """The table's total size, with its partitions' (a partitioned parent has none itself)."""
    query = (
        "SELECT sum(pg_total_relation_size(r)) FROM (SELECT %s::regclass AS r "
        "UNION SELECT relid FROM pg_partition_tree(%s::regclass)) t"
    )
    row = conn.execute(query, (f"{S}.{table}",) * 2).fetchone()
    assert row is not None
    return round(float(row[0]) / 2**20, 2)


#: one human line per figure, formatted with the figures (and ``n``, the partition count)
LINES = {
    "copy": "1. bulk copy: flat {copy_flat_events_per_s:,} events/s, "
    "monthly + event_keys {copy_monthly_events_per_s:,} events/s",
    "append": f"2. appends at the head ({BATCHES} x {BATCH}): flat {{append_flat_events_per_s:,}} "
    "events/s, monthly + event_keys {append_monthly_events_per_s:,} events/s",
    "stream": f"3. one stream ({STREAMS} streams): flat p50 {{stream_read_p50_ms_flat}} / p99 "
    "{stream_read_p99_ms_flat} ms, monthly p50 {stream_read_p50_ms_monthly} / p99 "
    "{stream_read_p99_ms_monthly} ms (no pruning on stream: {n} partition indexes probed)",
    "page": f"4. catch-up page of {PAGE} ({PAGES} positions): flat p50 {{page_p50_ms_flat}} / "
    "p99 {page_p99_ms_flat} ms, monthly p50 {page_p50_ms_monthly} / p99 {page_p99_ms_monthly} ms",
    "day": f"5. one day by the key ({DAYS} days, no index on it): flat p50 {{day_p50_ms_flat}} "
    "ms (the whole table), monthly p50 {day_p50_ms_monthly} ms (one partition)",
    "walk": "6. chain walk (median of 3): flat {chain_walk_s_flat} s, monthly "
    "{chain_walk_s_monthly} s (a merge of {n} partitions' PK)",
    "retention": "7. retention of the oldest month ({deleted:,} rows): DETACH PARTITION "
    "{retention_detach_ms} ms, DELETE from flat {retention_delete_ms} ms (before vacuum)",
    "size": "8. sizes before retention: flat {size_mb_flat} MB, monthly + event_keys "
    "{size_mb_monthly} MB (event_keys {size_mb_event_keys} MB)",
}


def _say(line: str, r: dict[str, Any]) -> None:
    print(LINES[line].format(n=r["partitions"], **r), flush=True)


def _latencies(r: dict[str, Any], name: str, table: str, ms: list[float]) -> None:
    r[f"{name}_p50_ms_{table}"] = round(statistics.median(ms), 3)
    r[f"{name}_p99_ms_{table}"] = round(_p(ms, 0.99), 3)


def _measure(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    rng = random.Random(7)
    query = "SELECT max(position), min(occurred_at), max(occurred_at) FROM events"
    row = conn.execute(query).fetchone()
    assert row is not None and row[0], "the store is empty"
    head, first, newest = row
    months = [first.replace(day=1, hour=0, minute=0, second=0, microsecond=0)]
    while _next_month(months[-1]) <= newest:
        months.append(_next_month(months[-1]))
    _create(conn, months)
    r: dict[str, Any] = {"events": head, "partitions": len(months), "partition_key": "occurred_at"}
    print(
        f"{head:,} events; partition key: occurred_at (standing in for recorded_at); "
        f"{len(months)} monthly partitions, {months[0]:%Y-%m} to {months[-1]:%Y-%m}",
        flush=True,
    )
    copy = f"({COLUMNS}, {KEY}) SELECT {COLUMNS}, occurred_at FROM events"
    started = time.perf_counter()
    conn.execute(f"INSERT INTO {S}.flat {copy}")
    r["copy_flat_events_per_s"] = round(head / (time.perf_counter() - started))
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(f"INSERT INTO {S}.monthly {copy}")
        conn.execute(
            f"INSERT INTO {S}.event_keys SELECT event_id, stream, version, position FROM events"
        )
    r["copy_monthly_events_per_s"] = round(head / (time.perf_counter() - started))
    conn.execute(f"ANALYZE {S}.flat, {S}.monthly, {S}.event_keys")
    _say("copy", r)
    r["size_mb_flat"] = _size_mb(conn, "flat")
    r["size_mb_event_keys"] = _size_mb(conn, "event_keys")
    r["size_mb_monthly"] = round(_size_mb(conn, "monthly") + r["size_mb_event_keys"], 2)

    streams = [s for (s,) in conn.execute("SELECT DISTINCT stream FROM events")]
    picked = [(s,) for s in rng.sample(streams, min(STREAMS, len(streams)))]
    positions = [(rng.randrange(head),) for _ in range(PAGES)]
    midnight = first.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [midnight + timedelta(rng.randrange((newest - midnight).days + 1)) for _ in range(DAYS)]
    windows = [(day, day + timedelta(days=1)) for day in days]
    batches = _synthetic(conn, rng, head, newest)
    for t in ("flat", "monthly"):
        r[f"append_{t}_events_per_s"] = round(_appends(conn, t, batches))
        select = f"SELECT {COLUMNS} FROM {S}.{t} WHERE"
        query = f"{select} stream = %s ORDER BY version"
        _latencies(r, "stream_read", t, _timed_ms(conn, query, picked))
        query = f"{select} position > %s ORDER BY position LIMIT {PAGE}"
        _latencies(r, "page", t, _timed_ms(conn, query, positions))
        query = f"SELECT count(*), sum(length(data::text)) FROM {S}.{t} WHERE {DAY}"
        r[f"day_p50_ms_{t}"] = round(statistics.median(_timed_ms(conn, query, windows)), 3)
        r[f"chain_walk_s_{t}"] = round(statistics.median(_walk(conn, t) for _ in range(3)), 4)
    for line in ("append", "stream", "page", "day", "walk"):
        _say(line, r)

    started = time.perf_counter()
    conn.execute(f"ALTER TABLE {S}.monthly DETACH PARTITION {S}.monthly_{months[0]:%Y_%m}")
    r["retention_detach_ms"] = round((time.perf_counter() - started) * 1000, 3)
    started = time.perf_counter()
    cut = _next_month(months[0])
    deleted = conn.execute(f"DELETE FROM {S}.flat WHERE {KEY} < %s", (cut,)).rowcount
    r["retention_delete_ms"] = round((time.perf_counter() - started) * 1000, 3)
    print(LINES["retention"].format(deleted=deleted, **r), flush=True)
    _say("size", r)
    return r


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench partitions")
    parser.add_argument("--events", type=int, default=1_000_000, help="stored events")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="use (build if missing) the kept store of bench api --keep for --events",
    )
    args = parser.parse_args(argv)
    with bench_store(args.events, keep=args.keep) as (url, _built):
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET TimeZone = 'UTC'")
            try:
                result = _measure(conn)
            finally:
                conn.execute(f"DROP SCHEMA IF EXISTS {S} CASCADE")
    print(json.dumps(result))
    return 0
