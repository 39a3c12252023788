"""The PostgreSQL adapter's lease (:class:`~ledger.store.base.Lease`): one active instance
of a role, such as the dispatcher, among several started.

A session advisory lock taken with ``pg_try_advisory_lock`` on a connection of its own,
held for the holder's life. When the holder dies its session ends and the server
releases the lock (keepalives bound how long a vanished host keeps it), so a waiting
instance takes over. The lock keys live here only (``tests/ledger/store/test_sealed.py``); the
in-memory fake's equivalent is ``MemoryLeases`` (``tests/support/memory_store.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from ledger.store.base import Lease

__all__ = ["LEASE_LOCK_CLASS", "PostgresLease", "lease_key"]

#: The first of the two int4 keys of every lease's advisory lock ("DLC" + 1): the
#: two-key space never overlaps the append lock's one bigint key.
LEASE_LOCK_CLASS = 0x444C4301


def lease_key(name: str) -> int:
    """The second advisory-lock key of lease ``name`` (a signed int4)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


class PostgresLease(Lease):
    """A session advisory lock on a dedicated autocommit connection."""

    def __init__(self, conn: psycopg.Connection[Any], name: str) -> None:
        self._conn = conn
        self.name = name

    @classmethod
    def try_take(cls, url: str, name: str) -> PostgresLease | None:
        # keepalives: a holder whose host vanished without closing its socket is
        # noticed within ~15 s
        conninfo = make_conninfo(
            url,
            application_name=f"dlc-ledger lease {name}"[:63],
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        )
        conn = psycopg.connect(conninfo, autocommit=True)
        try:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (LEASE_LOCK_CLASS, lease_key(name))
            ).fetchone()
        except BaseException:
            conn.close()
            raise
        if not row or not row[0]:
            conn.close()
            return None
        return cls(conn, name)

    def alive(self) -> bool:
        if self._conn.closed:
            return False
        try:
            self._conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        if self._conn.closed:
            return
        try:
            self._conn.execute(
                "SELECT pg_advisory_unlock(%s, %s)", (LEASE_LOCK_CLASS, lease_key(self.name))
            )
        except psycopg.Error:
            pass  # the session is gone, and the lock with it
        finally:
            self._conn.close()
