"""The PostgreSQL adapter of the event store.

Ordering and gap safety: every append takes one transaction-scoped advisory lock
(``pg_advisory_xact_lock``) before it reads the head of the chain. Appends are
therefore serialised, positions are assigned densely in commit order, and a
transaction's rows are visible before the next appender can even read the head
(PostgreSQL releases locks only after the commit is visible). A reader tailing by
``position > p`` can never skip a row that commits later at a lower position.
The transaction-id horizon (``pg_snapshot_xmin``) would allow concurrent
appenders, but the hash chain needs a total order at write time anyway, so the
lock costs nothing the chain did not already cost. Batches amortise it.

Bulk path: rows are written with ``COPY`` (about twice as fast as multi-row
INSERT on a JSONB table with four indexes).
"""

from __future__ import annotations

import hashlib
import select as io_select
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson
import psycopg
from psycopg.errors import UniqueViolation
from sqlalchemy import Connection, Engine, and_, delete, event, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from ledger.envelopes import Envelope
from ledger.errors import Invalid
from ledger.store.base import (
    AppendResult,
    AppendSignal,
    Checkpoint,
    ConcurrencyConflict,
    DeadLetter,
    DuplicateEventConflict,
    EventStore,
    Lease,
    RecordedEvent,
    StoreError,
    UnitOfWork,
    VerifyResult,
)
from ledger.store.chain import (
    GENESIS_HASH,
    dedupe_batch,
    fact_hash,
    record_hash,
    stored_fact_hash,
)
from ledger.store.engines import make_engine
from ledger.store.leases import PostgresLease
from ledger.store.schema import checkpoints, dead_letters, events

__all__ = ["GENESIS_HASH", "PostgresEventStore", "PostgresUnitOfWork", "record_hash"]

#: Arbitrary constant naming the append lock among advisory locks.
APPEND_LOCK_KEY = 0x444C435F4C4544  # "DLC_LED"

_COLUMNS = (
    "position, event_id, stream, version, type, schema_version, occurred_at, observed_at, "
    "recorded_at, source, causation_id, correlation_id, data, hash"
)
# Binary COPY costs a fraction of text COPY's Python time. The data column is sent as
# jsonb's binary wire format (a version byte, then the JSON text) declared as bytea, so
# psycopg passes our canonical bytes through untouched instead of re-serialising them.
_COPY_TYPES = [
    "int8", "uuid", "text", "int4", "text", "int4", "timestamptz", "timestamptz",
    "timestamptz", "text", "uuid", "uuid", "bytea", "bytea",
]  # fmt: skip
_JSONB_V1 = b"\x01"

_READ_COLUMNS = [
    events.c.position,
    events.c.version,
    events.c.recorded_at,
    events.c.event_id,
    events.c.type,
    events.c.schema_version,
    events.c.stream,
    events.c.occurred_at,
    events.c.observed_at,
    events.c.source,
    events.c.causation_id,
    events.c.correlation_id,
    events.c.data,
]


# data as text, decoded by orjson in _fetch: psycopg's jsonb loader is a Python call
# per value around the same orjson.loads, and cost as much again (200,000 events: 0.7 s
# of client CPU through the loader, 0.35 s decoding the text directly)
_SELECT_SQL = (
    "SELECT position, version, recorded_at, event_id, type, schema_version, stream, "
    "occurred_at, observed_at, source, causation_id, correlation_id, data::text FROM events "
)


def _fetch(conn: Connection, sql: str, params: Sequence[Any]) -> list[RecordedEvent]:
    """The events of ``sql`` (``_SELECT_SQL`` + conditions), straight from the driver:
    SQLAlchemy's Row machinery costs more than the query. The columns are in
    RecordedEvent's field order, as are ``_READ_COLUMNS``."""
    raw = conn.connection.driver_connection
    assert raw is not None
    loads = orjson.loads
    # binary results: timestamps and uuids cross as fixed-width values, which saves
    # formatting on the server and parsing here (200,000 events: 0.14 s of PostgreSQL CPU
    # and 0.17 s of ours); text columns, data::text included, arrive as they would as text
    with raw.cursor(binary=True) as cur:
        cur.execute(sql, params)
        rows: list[Any] = cur.fetchall()
    return [RecordedEvent._make((*row[:12], loads(row[12]))) for row in rows]


class PostgresUnitOfWork(UnitOfWork):
    """One transaction on ``conn``; ``read_only`` for :meth:`PostgresEventStore.snapshot`."""

    def __init__(self, conn: Connection, *, read_only: bool = False) -> None:
        self._conn = conn
        self._read_only = read_only

    @property
    def connection(self) -> Connection:
        return self._conn

    def _writable(self) -> None:
        # the database refuses a snapshot's writes too (READ ONLY), but not the advisory
        # lock, and with an error of its own: refuse every one here, as the port says
        if self._read_only:
            raise StoreError("a snapshot of the store is read-only")

    def lock_appends(self) -> None:
        self._writable()
        # transaction-scoped: released by the commit or rollback, re-entrant within it
        self._conn.execute(select(func.pg_advisory_xact_lock(APPEND_LOCK_KEY)))

    # -- reads in this transaction ----------------------------------------------------------

    def head_position(self) -> int:
        value = self._conn.execute(
            select(func.coalesce(func.max(events.c.position), 0))
        ).scalar_one()
        return int(value)

    def read_window(
        self, after: int, upto: int, types: Collection[str] | None = None
    ) -> list[RecordedEvent]:
        if types is None:
            return _fetch(
                self._conn,
                _SELECT_SQL + "WHERE position > %s AND position <= %s ORDER BY position",
                (after, upto),
            )
        return _fetch(
            self._conn,
            _SELECT_SQL
            + "WHERE position > %s AND position <= %s AND type = ANY(%s) ORDER BY position",
            (after, upto, sorted(types)),
        )

    def read_stream(self, stream: str, *, upto: int | None = None) -> list[RecordedEvent]:
        if upto is None:
            return _fetch(self._conn, _SELECT_SQL + "WHERE stream = %s ORDER BY version", (stream,))
        return _fetch(
            self._conn,
            _SELECT_SQL + "WHERE stream = %s AND position <= %s ORDER BY version",
            (stream, upto),
        )

    def read_streams(self, streams: Collection[str], *, before: int) -> list[RecordedEvent]:
        return _fetch(
            self._conn,
            _SELECT_SQL + "WHERE stream = ANY(%s) AND position < %s ORDER BY position",
            (list(streams), before),
        )

    def read_ids(self, event_ids: Collection[UUID]) -> list[RecordedEvent]:
        if not event_ids:
            return []
        return _fetch(
            self._conn,
            _SELECT_SQL + "WHERE event_id = ANY(%s) ORDER BY position",
            (list(event_ids),),
        )

    def read_positions(self, positions: Collection[int]) -> list[RecordedEvent]:
        if not positions:
            return []
        return _fetch(
            self._conn,
            _SELECT_SQL + "WHERE position = ANY(%s) ORDER BY position",
            (list(positions),),
        )

    def lock_checkpoints(self, names: Collection[str]) -> dict[str, int]:
        self._writable()
        ordered = sorted(names)
        # rows first: FOR UPDATE locks only rows that exist, and two steps of a new
        # projection must still exclude each other
        self._conn.execute(
            text(
                "INSERT INTO checkpoints (name, position, offsets, updated_at) "
                "SELECT n, 0, '{}'::jsonb, now() FROM unnest(CAST(:names AS text[])) n "
                "ON CONFLICT (name) DO NOTHING"
            ),
            {"names": ordered},
        )
        rows = self._conn.execute(
            text(
                "SELECT name, position FROM checkpoints "
                "WHERE name = ANY(CAST(:names AS text[])) ORDER BY name FOR UPDATE"
            ),
            {"names": ordered},
        ).all()
        return {name: int(position) for name, position in rows}

    def append(
        self,
        events_in: Sequence[Envelope],
        *,
        expected_versions: Mapping[str, int] | None = None,
        on_conflict: str = "raise",
    ) -> AppendResult:
        """Append a batch; see :class:`UnitOfWork`.

        ``on_conflict="dead-letter"`` records an id reused with a different fact as a
        dead letter and goes on (the ingest path); ``"raise"`` aborts the batch.
        """
        self._writable()
        if not events_in and not expected_versions:
            return AppendResult(())
        conn = self._conn
        self.lock_appends()

        duplicates: list[UUID] = []
        batch = dedupe_batch(events_in, duplicates, lambda e: self._conflict(e, on_conflict))

        # Optimistic path: most batches hold no already-stored event, so try the
        # COPY first and let the unique index find duplicates; only a batch that
        # trips it pays for the look-up (a redelivery after a crash, typically).
        savepoint = conn.begin_nested()
        try:
            result = self._write(batch, duplicates, expected_versions)
        except UniqueViolation as exc:
            savepoint.rollback()
            if exc.diag.constraint_name != "events_event_id_key":
                raise
            batch = self._drop_stored(batch, duplicates, on_conflict)
            return self._write(batch, duplicates, expected_versions)
        except BaseException:
            savepoint.rollback()
            raise
        savepoint.commit()
        return result

    def _drop_stored(
        self,
        batch: list[tuple[Envelope, bytes]],
        duplicates: list[UUID],
        on_conflict: str,
    ) -> list[tuple[Envelope, bytes]]:
        stored = {
            row[0]: stored_fact_hash(*row[1:])
            for row in self._conn.execute(
                text(
                    "SELECT event_id, type, schema_version, stream, occurred_at, data "
                    "FROM events WHERE event_id = ANY(CAST(:ids AS uuid[]))"
                ),
                {"ids": [envelope.event_id for envelope, _ in batch]},
            ).all()
        }
        kept = []
        for envelope, data_json in batch:
            known = stored.get(envelope.event_id)
            if known is None:
                kept.append((envelope, data_json))
            elif known == fact_hash(envelope, data_json):
                duplicates.append(envelope.event_id)
            else:
                self._conflict(envelope, on_conflict)
        return kept

    def _write(
        self,
        batch: list[tuple[Envelope, bytes]],
        duplicates: list[UUID],
        expected_versions: Mapping[str, int] | None,
    ) -> AppendResult:
        conn = self._conn
        streams = {envelope.stream for envelope, _ in batch} | set(expected_versions or ())
        versions = self._stream_versions(streams)
        for stream, expected in (expected_versions or {}).items():
            actual = versions.get(stream, 0)
            if actual != expected:
                raise ConcurrencyConflict(stream, expected, actual)
        if not batch:
            return AppendResult((), tuple(duplicates))

        head = conn.execute(
            select(events.c.position, events.c.hash).order_by(events.c.position.desc()).limit(1)
        ).first()
        position, previous = (head[0], bytes(head[1])) if head else (0, GENESIS_HASH)
        recorded_at = datetime.now(UTC)
        positions = []
        raw = conn.connection.driver_connection
        assert raw is not None
        # Rows are hashed and written inside the COPY, so the server parses and
        # indexes one chunk while Python hashes the next.
        with (
            raw.cursor() as cur,
            cur.copy(f"COPY events ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(_COPY_TYPES)
            for envelope, data_json in batch:
                position += 1
                version = versions.get(envelope.stream, 0) + 1
                versions[envelope.stream] = version
                previous = record_hash(
                    previous, position, version, recorded_at, envelope, data_json
                )
                positions.append(position)
                copy.write_row(
                    (
                        position,
                        envelope.event_id,
                        envelope.stream,
                        version,
                        envelope.type,
                        envelope.schema_version,
                        envelope.occurred_at,
                        envelope.observed_at,
                        recorded_at,
                        envelope.source,
                        envelope.causation_id,
                        envelope.correlation_id,
                        _JSONB_V1 + data_json,
                        previous,
                    )
                )
        # delivered at commit; wakes tailing projectors without polling
        conn.execute(text("SELECT pg_notify('dlc_events', :p)"), {"p": str(position)})
        return AppendResult(tuple(positions), tuple(duplicates))

    def _conflict(self, envelope: Envelope, on_conflict: str) -> None:
        if on_conflict == "raise":
            raise DuplicateEventConflict(envelope.event_id)
        self.record_dead_letter(
            source=envelope.source,
            reason="conflicting-duplicate",
            error=str(DuplicateEventConflict(envelope.event_id)),
            payload=envelope.to_json(),
        )

    def _stream_versions(self, streams: set[str]) -> dict[str, int]:
        if not streams:
            return {}
        result = self._conn.execute(
            text(
                "SELECT s, (SELECT max(version) FROM events WHERE stream = s) "
                "FROM unnest(CAST(:streams AS text[])) AS s"
            ),
            {"streams": sorted(streams)},
        )
        return {stream: version for stream, version in result.all() if version is not None}

    def load_checkpoint(self, name: str, *, for_update: bool = False) -> Checkpoint:
        query = select(checkpoints).where(checkpoints.c.name == name)
        if for_update:
            self._writable()
            query = query.with_for_update()
        row = self._conn.execute(query).first()
        if row is None:
            return Checkpoint(name)
        return Checkpoint(name, row.position, dict(row.offsets), row.updated_at)

    def save_checkpoint(
        self, name: str, *, position: int | None = None, offsets: Mapping[str, int] | None = None
    ) -> None:
        self._writable()
        values: dict[str, Any] = {"updated_at": datetime.now(UTC)}
        if position is not None:
            values["position"] = position
        if offsets is not None:
            values["offsets"] = dict(offsets)
        stmt = pg_insert(checkpoints).values(
            name=name,
            position=position or 0,
            offsets=dict(offsets or {}),
            updated_at=values["updated_at"],
        )
        if offsets is not None:
            # merge so partitions not in this batch keep their offsets
            values["offsets"] = checkpoints.c.offsets.op("||")(stmt.excluded.offsets)
        self._conn.execute(stmt.on_conflict_do_update(index_elements=["name"], set_=values))

    def checkpoints(self, prefix: str) -> list[Checkpoint]:
        rows = self._conn.execute(
            select(checkpoints).where(checkpoints.c.name.startswith(prefix, autoescape=True))
        )
        found = [Checkpoint(r.name, r.position, dict(r.offsets), r.updated_at) for r in rows]
        # by code point, as the in-memory adapter sorts: not the database's collation
        return sorted(found, key=lambda checkpoint: checkpoint.name)

    def delete_checkpoints(self, prefix: str) -> None:
        self._writable()
        self._conn.execute(
            delete(checkpoints).where(checkpoints.c.name.startswith(prefix, autoescape=True))
        )

    def record_dead_letter(
        self,
        *,
        source: str,
        reason: str,
        error: str,
        payload: bytes,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> int:
        self._writable()
        now = datetime.now(UTC)
        # the evidence must be storable whatever the message held: the payload is bytea,
        # the text columns get NUL and lone surrogates escaped
        source, reason, error = (_storable_text(t) for t in (source, reason, error[:4000]))
        fingerprint = hashlib.sha256(source.encode() + b"\x00" + payload).digest()
        stmt = pg_insert(dead_letters).values(
            fingerprint=fingerprint,
            source=source,
            reason=reason,
            error=error,
            payload=payload,
            topic=topic,
            partition=partition,
            offset=offset,
            first_seen=now,
            last_seen=now,
            count=1,
        )
        upsert = stmt.on_conflict_do_update(
            index_elements=["fingerprint"],
            set_={
                "last_seen": now,
                "count": dead_letters.c.count + 1,
                "error": stmt.excluded.error,
                "reason": stmt.excluded.reason,
                "resolved_at": None,
            },
        ).returning(dead_letters.c.id)
        return int(self._conn.execute(upsert).scalar_one())


def _storable_text(value: str) -> str:
    """``value`` as PostgreSQL text: NUL and unencodable characters as backslash escapes."""
    return value.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")


class PostgresEventStore(EventStore):
    """Event store on PostgreSQL via SQLAlchemy Core and psycopg 3.

    ``statement_timeout`` (seconds; None: none): PostgreSQL cancels any statement of this
    store's engine that runs longer, and the cancellation reaches callers as
    :class:`~ledger.errors.TimedOut` through :func:`~ledger.store.failures.as_ledger_error`.
    The API's reads run under one (``DLC_API_STATEMENT_TIMEOUT``), so a costly request ends
    with a 503 instead of holding a worker. It is set on the engine's sessions: give the
    store an engine of its own.
    """

    def __init__(
        self, url_or_engine: str | Engine, *, statement_timeout: float | None = None
    ) -> None:
        self.engine = (
            make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        )
        if statement_timeout is not None:
            _bound_statements(self.engine, statement_timeout)

    def close(self) -> None:
        self.engine.dispose()

    def try_lease(self, name: str) -> Lease | None:
        url = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresLease.try_take(url, name)

    @contextmanager
    def transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self.engine.begin() as conn:
            yield PostgresUnitOfWork(conn)

    @contextmanager
    def snapshot(self) -> Iterator[PostgresUnitOfWork]:
        with self.engine.connect() as conn:
            # the first statement of the transaction; the snapshot itself is taken at the
            # first read after it, and every read of the block sees that one
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                yield PostgresUnitOfWork(conn, read_only=True)
            finally:
                conn.rollback()

    @contextmanager
    def appends(self) -> Iterator[AppendSignal]:
        # a connection of its own, outside the pool: LISTEN lasts as long as the session
        url = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(url, autocommit=True) as listener:
            listener.execute("LISTEN dlc_events")
            yield _Notifications(listener)

    @contextmanager
    def outside_transaction(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn

    def stored_event_ids(self, event_ids: Collection[UUID]) -> set[UUID]:
        ids = list(event_ids)
        found: set[UUID] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 5_000):  # bounded statements, however many asked
                chunk = ids[start : start + 5_000]
                found.update(
                    conn.execute(select(events.c.event_id).where(events.c.event_id.in_(chunk)))
                    .scalars()
                    .all()
                )
        return found

    def _read(self, query: Any) -> list[RecordedEvent]:
        with self.engine.connect() as conn:
            return [RecordedEvent(*row) for row in conn.execute(query)]

    def read_stream(self, stream: str, *, after_version: int = 0) -> list[RecordedEvent]:
        return self._read(
            select(*_READ_COLUMNS)
            .where(and_(events.c.stream == stream, events.c.version > after_version))
            .order_by(events.c.version)
        )

    def read_after(self, position: int, *, limit: int = 1000) -> list[RecordedEvent]:
        with self.engine.connect() as conn:
            return _fetch(
                conn,
                _SELECT_SQL + "WHERE position > %s ORDER BY position LIMIT %s",
                (position, limit),
            )

    def read_by_type(
        self,
        types: Sequence[str],
        *,
        occurred_from: datetime | None = None,
        occurred_to: datetime | None = None,
        after_position: int = 0,
        limit: int = 1000,
    ) -> list[RecordedEvent]:
        query = select(*_READ_COLUMNS).where(
            events.c.type.in_(list(types)), events.c.position > after_position
        )
        if occurred_from is not None:
            query = query.where(events.c.occurred_at >= occurred_from)
        if occurred_to is not None:
            query = query.where(events.c.occurred_at < occurred_to)
        return self._read(query.order_by(events.c.position).limit(limit))

    def may_write(self) -> bool:
        """Whether this connection's role may move checkpoints (a writer, not a reader)."""
        with self.engine.connect() as conn:
            query = text("SELECT has_table_privilege('checkpoints', 'UPDATE')")
            return bool(conn.execute(query).scalar_one())

    def head_position(self) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(select(func.coalesce(func.max(events.c.position), 0))).scalar_one()
            )

    def stream_version(self, stream: str) -> int:
        with self.engine.connect() as conn:
            value = conn.execute(
                select(func.coalesce(func.max(events.c.version), 0)).where(
                    events.c.stream == stream
                )
            ).scalar_one()
            return int(value)

    def verify(self, *, batch: int = 10_000) -> VerifyResult:
        if batch < 1:  # LIMIT 0 reads nothing: an empty check is no proof of an intact chain
            raise Invalid(f"batch must be at least 1, got {batch}")
        previous = GENESIS_HASH
        expected_position = 1
        checked = 0
        with self.engine.connect() as conn:
            head = conn.execute(select(func.coalesce(func.max(events.c.position), 0))).scalar_one()
            while True:
                rows = conn.execute(
                    select(*_READ_COLUMNS, events.c.hash)
                    .where(events.c.position >= expected_position)
                    .order_by(events.c.position)
                    .limit(batch)
                ).all()
                if not rows:
                    if checked < head:  # intact means every event stored when we began
                        return VerifyResult(checked, checked + 1, "events were not all read")
                    return VerifyResult(checked)
                for row in rows:
                    if row.position != expected_position:
                        return VerifyResult(
                            checked, expected_position, f"position {expected_position} is missing"
                        )
                    recorded = RecordedEvent(*row[:13])  # the hash is the 14th column
                    digest = record_hash(
                        previous, row.position, row.version, row.recorded_at, recorded.envelope
                    )
                    if digest != bytes(row.hash):
                        return VerifyResult(
                            checked,
                            row.position,
                            f"hash mismatch at position {row.position} (event {row.event_id})",
                        )
                    previous = digest
                    expected_position += 1
                    checked += 1

    def dead_letters(
        self, *, include_resolved: bool = False, after_id: int = 0, limit: int | None = None
    ) -> list[DeadLetter]:
        query = (
            select(dead_letters)
            .where(dead_letters.c.id > after_id)
            .order_by(dead_letters.c.id)
            .limit(limit)
        )
        if not include_resolved:
            query = query.where(dead_letters.c.resolved_at.is_(None))
        with self.engine.connect() as conn:
            return [_dead_letter(row) for row in conn.execute(query)]

    def dead_letter(self, letter_id: int) -> DeadLetter | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(dead_letters).where(dead_letters.c.id == letter_id)).first()
        return _dead_letter(row) if row else None

    def resolve_dead_letter(self, letter_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                dead_letters.update()
                .where(dead_letters.c.id == letter_id)
                .values(resolved_at=datetime.now(UTC))
            )


def _bound_statements(engine: Engine, seconds: float) -> None:
    """Every session ``engine`` opens from now on has ``statement_timeout`` set. In the
    connection's startup options, not a ``SET`` per transaction: no round trip per request,
    and it covers every statement, the store's own reads outside a snapshot too."""
    if not 0 < seconds <= 86_400:
        raise Invalid(f"a statement timeout is more than 0 and at most a day, got {seconds} s")
    millis = max(1, round(seconds * 1000))

    @event.listens_for(engine, "do_connect")
    def _with_timeout(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        params["options"] = f"{params.get('options', '')} -c statement_timeout={millis}".strip()

    engine.dispose()  # a session opened before (the schema check's) has no timeout


class _Notifications(AppendSignal):
    """``NOTIFY dlc_events`` (sent by every append at commit) on a listening connection."""

    def __init__(self, listener: psycopg.Connection[Any]) -> None:
        self._listener = listener

    def wait(self, timeout: float) -> bool:
        io_select.select([self._listener.fileno()], [], [], timeout)
        # drain: a burst of appends is one wake-up
        return sum(1 for _ in self._listener.notifies(timeout=0)) > 0


def _dead_letter(row: Any) -> DeadLetter:
    return DeadLetter(
        id=row.id,
        source=row.source,
        reason=row.reason,
        error=row.error,
        payload=bytes(row.payload),
        topic=row.topic,
        partition=row.partition,
        offset=row.offset,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        count=row.count,
        resolved_at=row.resolved_at,
    )
