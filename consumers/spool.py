"""The producer's durable spool: events wait here, in order, while Kafka is unreachable.

A watcher must never lose an observed fact because the broker is down, and must
not block the Kubernetes watch for minutes either. The spool is a SQLite file in
WAL mode with ``synchronous=FULL``: an append returns only once the rows are on
disk, so they survive a crash or restart of the producer process. Rows are read
back strictly in insertion order and deleted only after Kafka acknowledged them.

It is bounded: a full spool raises :class:`SpoolFull` (loudly, never dropping),
so an outage that outlasts the disk budget becomes an alert rather than silent
data loss.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from consumers.private import private_dir, private_file
from ledger.errors import Unavailable

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_RECORDS", "Spool", "SpoolFull", "SpooledRecord"]

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_MAX_RECORDS = 2_000_000


class SpoolFull(Unavailable):
    """The spool would exceed its budget; nothing of the refused batch was written."""

    def __init__(self, message: str, *, accepted: int = 0) -> None:
        super().__init__(message)
        #: how many events of the caller's batch were delivered or spooled before this
        self.accepted = accepted


@dataclass(frozen=True, slots=True)
class SpooledRecord:
    """One Kafka message waiting to be sent."""

    topic: str
    key: bytes | None
    value: bytes

    @property
    def size(self) -> int:
        return len(self.value) + len(self.key or b"")


class Spool:
    """An ordered, durable, bounded FIFO of Kafka messages in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        self.path = Path(path)
        # event payloads: owner-only (SQLite gives its -wal and -shm files the same mode)
        private_file(private_dir(self.path.parent) / self.path.name)
        self.max_bytes = max_bytes
        self.max_records = max_records
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS spool ("
            " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
            " topic TEXT NOT NULL, key BLOB, value BLOB NOT NULL)"
        )
        row = self._db.execute(
            "SELECT count(*), coalesce(sum(length(value) + coalesce(length(key), 0)), 0) FROM spool"
        ).fetchone()
        self._count, self._bytes = int(row[0]), int(row[1])

    def __len__(self) -> int:
        return self._count

    @property
    def bytes(self) -> int:
        return self._bytes

    def append(self, records: Sequence[SpooledRecord]) -> None:
        """Write ``records`` durably after all spooled ones, or raise :class:`SpoolFull`."""
        if not records:
            return
        size = sum(r.size for r in records)
        with self._lock:
            if self._count + len(records) > self.max_records or self._bytes + size > self.max_bytes:
                raise SpoolFull(
                    f"producer spool {self.path} is full: {self._count} events /"
                    f" {self._bytes} bytes spooled, {len(records)} more ({size} bytes) would exceed"
                    f" {self.max_records} events / {self.max_bytes} bytes; Kafka has been"
                    " unreachable too long"
                )
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO spool (topic, key, value) VALUES (?, ?, ?)",
                    [(r.topic, r.key, r.value) for r in records],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._count += len(records)
            self._bytes += size

    def peek(self, limit: int) -> list[tuple[int, SpooledRecord]]:
        """The oldest ``limit`` records with their sequence numbers, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, topic, key, value FROM spool ORDER BY seq LIMIT ?", (limit,)
            ).fetchall()
        return [(int(seq), SpooledRecord(topic, key, value)) for seq, topic, key, value in rows]

    def remove_through(self, seq: int) -> None:
        """Forget every record up to and including ``seq`` (Kafka acknowledged them)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT count(*), coalesce(sum(length(value) + coalesce(length(key), 0)), 0)"
                    " FROM spool WHERE seq <= ?",
                    (seq,),
                ).fetchone()
                self._db.execute("DELETE FROM spool WHERE seq <= ?", (seq,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._count -= int(row[0])
            self._bytes -= int(row[1])

    def close(self) -> None:
        with self._lock:
            self._db.close()
