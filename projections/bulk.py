"""Bulk writes for projections: COPY, and upsert through a COPY-filled temporary table.

A page of a few thousand events turns into a few thousand row writes; one
statement per row would cap a projection at a few thousand events per second.
COPY into a session-local temporary table followed by one
``INSERT … SELECT … ON CONFLICT DO UPDATE`` writes the whole page in two round
trips, inside the runner's transaction (so a rollback undoes it with the page).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, text

__all__ = ["copy_rows", "fetch_by_keys", "upsert_rows"]


def _raw(conn: Connection) -> Any:
    raw = conn.connection.driver_connection
    if raw is None:  # pragma: no cover - a live SQLAlchemy connection always has one
        raise RuntimeError("connection has no driver connection")
    return raw


def copy_rows(
    conn: Connection, table: str, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]
) -> None:
    """COPY ``rows`` (tuples in ``columns`` order) into ``table``.

    psycopg's C row writer beats rendering COPY text in Python (measured: 0.17 s
    vs 0.35 s for 50,000 timeline rows, server time included).
    """
    cols = ", ".join(f'"{c}"' for c in columns)
    with _raw(conn).cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def upsert_rows(
    conn: Connection,
    table: Table,
    rows: Sequence[tuple[Any, ...]],
    *,
    key: Sequence[str],
) -> None:
    """Insert or replace whole rows (every column of ``table``, in table order).

    Keys must be unique within ``rows``; a row whose key exists replaces it.
    """
    if not rows:
        return
    columns = [c.name for c in table.columns]
    temp = f"_upsert_{table.name}"
    conn.execute(
        text(
            f"CREATE TEMP TABLE IF NOT EXISTS {temp} "
            f"(LIKE {table.name} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
    )
    copy_rows(conn, temp, columns, rows)
    cols = ", ".join(f'"{c}"' for c in columns)
    updates = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in columns if c not in key)
    keys = ", ".join(f'"{k}"' for k in key)
    conn.execute(
        text(
            f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM {temp} "
            f"ON CONFLICT ({keys}) DO UPDATE SET {updates}"
        )
    )
    conn.execute(text(f"DELETE FROM {temp}"))


def fetch_by_keys(
    conn: Connection, table: Table, key: str, values: Iterable[str], *, where: str = ""
) -> list[Any]:
    """Rows of ``table`` whose ``key`` is in ``values`` (one round trip)."""
    wanted = sorted(set(values))
    if not wanted:
        return []
    extra = f" AND ({where})" if where else ""
    cols = ", ".join(f'"{c.name}"' for c in table.columns)
    return list(
        conn.execute(
            text(f'SELECT {cols} FROM {table.name} WHERE "{key}" = ANY(:keys){extra}'),
            {"keys": wanted},
        )
    )
