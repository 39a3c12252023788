"""One store over two logins: reads as a reader, writes as a writer.

The API reads (every route) and writes a little (subscription orders, notification rules).
Least privilege wants its reads on a ``dlc_ledger_reader`` login, which PostgreSQL refuses
any write, and only the writes on a ``dlc_ledger_writer`` login (docs/store.md, "Roles").
The routes take one store; this one sends every unit of work that may write
(:meth:`transaction`, :meth:`outside_transaction`, a lease) to the writer's pool, opened on
the first write, and everything else (snapshots, reads, ``may_write``'s answer aside) to the
reader's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection

from ledger.store.base import Lease
from ledger.store.postgres import PostgresEventStore, PostgresUnitOfWork

__all__ = ["ReadWriteStore"]


class ReadWriteStore(PostgresEventStore):
    """Reads on ``reader_url``'s login; transactions (every append, every write) on
    ``writer_url``'s, whose pool opens on the first write."""

    def __init__(
        self, reader_url: str, writer_url: str, *, statement_timeout: float | None = None
    ) -> None:
        super().__init__(reader_url, statement_timeout=statement_timeout)
        self._writer_url = writer_url
        self._statement_timeout = statement_timeout
        self._writer: PostgresEventStore | None = None
        self._lock = threading.Lock()

    def writer(self) -> PostgresEventStore:
        """The writer login's store (opened now if it is the first write)."""
        with self._lock:
            if self._writer is None:
                self._writer = PostgresEventStore(
                    self._writer_url, statement_timeout=self._statement_timeout
                )
            return self._writer

    @contextmanager
    def transaction(self) -> Iterator[PostgresUnitOfWork]:
        with self.writer().transaction() as uow:
            yield uow

    @contextmanager
    def outside_transaction(self) -> Iterator[Connection]:
        with self.writer().outside_transaction() as conn:
            yield conn

    def try_lease(self, name: str) -> Lease | None:
        return self.writer().try_lease(name)

    def may_write(self) -> bool:
        # a write use case catches its projections up after its append (projections.steps):
        # through the writer, so the reads right after it are current
        return self.writer().may_write()

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        super().close()
