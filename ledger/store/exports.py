"""Every column of ``events`` out in position order and back in unchanged: the adapter half
of ``dlc-ledger export`` and ``import`` (the use cases: ``dlc_ledger/services/store/exports.py``
and ``restores.py``).

A restore is not an append. :meth:`PostgresUnitOfWork.append
<ledger.store.postgres.PostgresUnitOfWork.append>` assigns the position, version,
``recorded_at`` and hash of each row; here they are the exported ones, written as they are
with the same binary COPY, so the restored chain is the original chain byte for byte. Nothing
else about ``events`` needs setting after such a load: ``position`` has no sequence (an append
takes the head + 1 under the append lock), and the append-only trigger refuses UPDATE, DELETE
and TRUNCATE only, so COPY passes it and a failed load rolls back like any insert.

Functions take the SQLAlchemy ``Connection`` of a unit of work (the port's
:attr:`~ledger.store.base.UnitOfWork.connection`), so the use cases hold a transaction or a
snapshot of the port and never the adapter; they reach the driver for what SQLAlchemy's rows
would slow down (a server-side cursor of binary rows, COPY).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from sqlalchemy import Connection, text

__all__ = ["COLUMNS", "StoredRow", "copy_rows", "finish_load", "head_row", "stored_rows"]

#: every column of ``events`` (ledger/store/schema.py), in :class:`StoredRow`'s order
COLUMNS = (
    "position",
    "event_id",
    "stream",
    "version",
    "type",
    "schema_version",
    "occurred_at",
    "observed_at",
    "recorded_at",
    "source",
    "causation_id",
    "correlation_id",
    "data",
    "hash",
)
_COPY_TYPES = [
    "int8", "uuid", "text", "int4", "text", "int4", "timestamptz", "timestamptz",
    "timestamptz", "text", "uuid", "uuid", "bytea", "bytea",
]  # fmt: skip
# jsonb's binary wire format is a version byte, then the JSON text: sent as bytea, the
# text goes through untouched (as the append path sends it)
_JSONB_V1 = b"\x01"
# data as UTF-8 bytes of its JSON text: the binary cursor then hands over bytes, neither
# parsed (psycopg's jsonb loader) nor decoded to str only to be encoded again
_SELECT = (
    "SELECT position, event_id, stream, version, type, schema_version, occurred_at, "
    "observed_at, recorded_at, source, causation_id, correlation_id, "
    "convert_to(data::text, 'UTF8'), hash FROM events ORDER BY position"
)


class StoredRow(NamedTuple):
    """One row of ``events``, every column: ``data`` is its JSON text (UTF-8), ``hash``
    the chain's link as stored."""

    position: int
    event_id: UUID
    stream: str
    version: int
    type: str
    schema_version: int
    occurred_at: datetime
    observed_at: datetime
    recorded_at: datetime
    source: str
    causation_id: UUID | None
    correlation_id: UUID | None
    data: bytes
    hash: bytes


def _driver(conn: Connection) -> Any:
    raw = conn.connection.driver_connection
    assert raw is not None  # a live connection of a unit of work
    return raw


def head_row(conn: Connection) -> tuple[int, bytes] | None:
    """The last row's (position, hash); None when ``events`` is empty."""
    row = conn.execute(
        text("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1")
    ).first()
    return None if row is None else (int(row[0]), bytes(row[1]))


def stored_rows(conn: Connection, *, fetch: int = 5_000) -> Iterator[list[StoredRow]]:
    """Every row in position order, ``fetch`` at a time, through a server-side cursor: memory
    holds one batch whatever the store's size. ``conn`` must be in a transaction (a snapshot,
    so that the rows are one consistent state of the store)."""
    # a cursor name is per session; one export per session at a time
    with _driver(conn).cursor(name="dlc_ledger_export", binary=True) as cur:
        cur.itersize = fetch
        cur.execute(_SELECT)
        while batch := cur.fetchmany(fetch):
            yield [StoredRow._make(row) for row in batch]


def copy_rows(conn: Connection, rows: Iterable[StoredRow]) -> int:
    """Write ``rows`` into ``events`` as they are (positions, versions, ``recorded_at`` and
    hashes included) with one binary COPY; the number written. An exception raised by
    ``rows`` ends the COPY with it, and the caller's transaction rolls back."""
    written = 0
    columns = ", ".join(COLUMNS)
    with (
        _driver(conn).cursor() as cur,
        cur.copy(f"COPY events ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(_COPY_TYPES)
        for row in rows:
            copy.write_row((*row[:12], _JSONB_V1 + row.data, row.hash))
            written += 1
    return written


def finish_load(conn: Connection) -> None:
    """Statistics for the planner after a bulk load (the owner's right: a role without it
    gets a warning, not an error), and a wake-up for a tailing projector."""
    conn.execute(text("ANALYZE events"))
    head = head_row(conn)
    if head is not None:
        conn.execute(text("SELECT pg_notify('dlc_events', :p)"), {"p": str(head[0])})
