"""The event store port: what every adapter promises (DESIGN §4).

The contract tests in ``tests/ledger/store/contract.py`` are written against this
interface; the adapter (:mod:`ledger.store.postgres`) and the in-memory fake of the tests
(``tests/support/memory_store.py``) pass them unchanged.

Guarantees an adapter must give:
- append-only, idempotent by ``event_id`` (same fact again: no-op; same id with a
  different fact: :class:`DuplicateEventConflict`, recorded as a dead letter);
- per-stream versions with optimistic concurrency (``expected_versions``);
- a global position that a tailing reader can follow without ever skipping an
  event committed later at a lower position;
- checkpoints written in the same transaction as the work they account for.

Projections and stream consumers depend on this module only; the composition root
(``dlc_ledger.wiring``) chooses the adapter. A projection step reads its events through
the :class:`UnitOfWork` it runs in (:meth:`UnitOfWork.read_window` and the other reads
there), so they are the events of that transaction, and writes its read-model rows on
:attr:`UnitOfWork.connection`.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple
from uuid import UUID

from sqlalchemy import Connection

from ledger.envelopes import Envelope
from ledger.errors import Conflict

__all__ = [
    "AppendResult",
    "AppendSignal",
    "Checkpoint",
    "ConcurrencyConflict",
    "Connection",
    "DeadLetter",
    "DuplicateEventConflict",
    "EventStore",
    "Lease",
    "OnConflict",
    "RecordedEvent",
    "StoreError",
    "UnitOfWork",
    "VerifyResult",
    "read_all_of_types",
]


class StoreError(Exception):
    """Base of the store's own errors."""


class ConcurrencyConflict(StoreError, Conflict):
    """A stream was not at the version the writer expected."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream!r} is at version {actual}, expected {expected}")
        self.stream, self.expected, self.actual = stream, expected, actual


class DuplicateEventConflict(StoreError, Conflict):
    """An event id already stored with a different fact."""

    def __init__(self, event_id: UUID) -> None:
        super().__init__(f"event {event_id} already stored with a different payload")
        self.event_id = event_id


_ENVELOPE_NAMES = tuple(Envelope.model_fields)
_ENVELOPE_FIELDS = frozenset(_ENVELOPE_NAMES)


class RecordedEvent(NamedTuple):
    """An event as stored: where and when the store put it, then its envelope's fields, flat.

    Flat, and a tuple, because projections read millions of them: a tuple of the row's
    columns costs a third of building a pydantic :class:`Envelope` per event (200,000
    events: 0.29 s against 0.75 s of client CPU). :attr:`envelope` builds the model when a
    reader wants one (each time: the readers that do want it once per event).
    """

    position: int
    version: int
    recorded_at: datetime
    event_id: UUID
    type: str
    schema_version: int
    stream: str
    occurred_at: datetime
    observed_at: datetime
    source: str
    causation_id: UUID | None
    correlation_id: UUID | None
    data: dict[str, Any]

    @property
    def envelope(self) -> Envelope:
        """The stored envelope (validated when it was appended, so not validated again:
        ``Envelope.model_construct`` would cost four times as much)."""
        envelope = Envelope.__new__(Envelope)
        # the fields after the first three are the envelope's, in its order
        object.__setattr__(envelope, "__dict__", dict(zip(_ENVELOPE_NAMES, self[3:], strict=True)))
        object.__setattr__(envelope, "__pydantic_fields_set__", _ENVELOPE_FIELDS)
        object.__setattr__(envelope, "__pydantic_extra__", None)
        object.__setattr__(envelope, "__pydantic_private__", None)
        return envelope


@dataclass(frozen=True, slots=True)
class AppendResult:
    """``positions`` of the newly stored events; ``duplicates`` skipped as already stored."""

    positions: tuple[int, ...]
    duplicates: tuple[UUID, ...] = ()

    @property
    def last_position(self) -> int | None:
        return self.positions[-1] if self.positions else None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """How far a consumer or projector got: a store position and/or Kafka offsets."""

    name: str
    position: int = 0
    offsets: Mapping[str, int] = field(default_factory=dict)  # "topic:partition" -> next offset
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    source: str
    reason: str
    error: str
    payload: bytes
    topic: str | None
    partition: int | None
    offset: int | None
    first_seen: datetime
    last_seen: datetime
    count: int
    resolved_at: datetime | None


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Outcome of recomputing the hash chain; ``broken_at`` is the first bad position."""

    checked: int
    broken_at: int | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_at is None


#: What :meth:`UnitOfWork.append` does with an id stored (or repeated in the batch) with a
#: different fact: refuse the batch, or keep the evidence as a dead letter and go on.
OnConflict = Literal["raise", "dead-letter"]


class UnitOfWork(abc.ABC):
    """One database transaction: appends, checkpoints and projection rows commit together.

    Everything done through it commits when the ``with`` block ends, or not at all when it
    raises. A refused :meth:`append` stores none of its events and the transaction may go on.
    """

    @abc.abstractmethod
    def append(
        self,
        events: Sequence[Envelope],
        *,
        expected_versions: Mapping[str, int] | None = None,
        on_conflict: OnConflict = "raise",
    ) -> AppendResult:
        """Append a batch: ids already stored with the same fact are ``duplicates``.

        ``on_conflict="dead-letter"`` records an id reused with a different fact as a
        dead letter (reason ``conflicting-duplicate``) and stores the rest of the batch (the
        ingest path); ``"raise"`` refuses the batch with :class:`DuplicateEventConflict`.
        """

    @abc.abstractmethod
    def lock_appends(self) -> None:
        """Hold the store's append lock until this unit ends: no other writer appends
        meanwhile, so the head read next stays the head while the caller decides what to
        append (a rater or an invoice run). :meth:`append` takes the same lock itself."""

    @abc.abstractmethod
    def load_checkpoint(self, name: str, *, for_update: bool = False) -> Checkpoint: ...

    @abc.abstractmethod
    def save_checkpoint(
        self, name: str, *, position: int | None = None, offsets: Mapping[str, int] | None = None
    ) -> None: ...

    @abc.abstractmethod
    def checkpoints(self, prefix: str) -> list[Checkpoint]:
        """Every checkpoint whose name starts with ``prefix`` (taken literally), names in
        code point order: a consumer keeping one per resource (``watch:<cluster>:``)."""

    @abc.abstractmethod
    def delete_checkpoints(self, prefix: str) -> None:
        """Delete every checkpoint whose name starts with ``prefix`` (taken literally)."""

    @abc.abstractmethod
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
    ) -> int: ...

    @abc.abstractmethod
    def lock_checkpoints(self, names: Collection[str]) -> dict[str, int]:
        """The positions of checkpoints ``names``, each created at 0 if new, all held until
        this unit ends (as :meth:`load_checkpoint` ``for_update``): a projection step's
        claim on its window. Locked in name order, so two units never deadlock."""

    # -- reads inside the unit: what this transaction sees (its own appends included) -----

    @abc.abstractmethod
    def head_position(self) -> int:
        """The highest position this transaction sees (0: none)."""

    @abc.abstractmethod
    def read_window(
        self, after: int, upto: int, types: Collection[str] | None = None
    ) -> list[RecordedEvent]:
        """Events with ``after < position <= upto`` (only of ``types``, unless None), in
        position order, in one read.

        Positions are dense and assigned in commit order, so a window that ends at or
        below :meth:`head_position` is complete: nothing can commit into it later.
        """

    @abc.abstractmethod
    def read_stream(self, stream: str, *, upto: int | None = None) -> list[RecordedEvent]:
        """Events of ``stream`` at positions up to ``upto`` (None: all), in version order."""

    @abc.abstractmethod
    def read_streams(self, streams: Collection[str], *, before: int) -> list[RecordedEvent]:
        """Events of ``streams`` at positions below ``before``, in position order."""

    @abc.abstractmethod
    def read_ids(self, event_ids: Collection[UUID]) -> list[RecordedEvent]:
        """The events with ``event_ids`` (those stored), in position order: an audit trail
        following a posting's ``cause_event_ids`` back to the cluster facts."""

    @abc.abstractmethod
    def read_positions(self, positions: Collection[int]) -> list[RecordedEvent]:
        """The events at ``positions`` (those that exist), in position order."""

    @property
    @abc.abstractmethod
    def connection(self) -> Connection:
        """This transaction's SQL connection, for projections writing their rows in it.

        SQL is meant: read models are PostgreSQL tables by design. A store without SQL (the
        in-memory fake of the tests) refuses with :class:`StoreError`."""


class AppendSignal(abc.ABC):
    """Wakes a tailing reader when events were appended (see :meth:`EventStore.appends`)."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> bool:
        """Block until an append commits after this signal was opened or last waited for,
        or ``timeout`` seconds pass; whether one did. A spurious True costs the caller
        one empty read, never a missed event."""


class Lease(abc.ABC):
    """An exclusive claim on a role (``dispatcher``) held for as long as its holder lives:
    one active instance among many. It ends when released, or when its holder dies (the
    PostgreSQL adapter's session ends with the process); another instance then takes it."""

    name: str

    @abc.abstractmethod
    def alive(self) -> bool:
        """Whether the lease is still held (its session is still up); False once lost."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lease up (idempotent)."""


class EventStore(abc.ABC):
    """The port. Reads are consistent snapshots; writes go through :meth:`transaction`."""

    @abc.abstractmethod
    def try_lease(self, name: str) -> Lease | None:
        """Take the lease called ``name`` if nobody holds it, else None (never waits)."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[UnitOfWork]: ...

    @abc.abstractmethod
    def snapshot(self) -> AbstractContextManager[UnitOfWork]:
        """A read-only unit of work: one consistent view of the store (and, on an SQL
        adapter, of the read models on its :attr:`~UnitOfWork.connection`) for a reader
        asking several questions. Writing through it (append, checkpoint, dead letter,
        a lock) raises :class:`StoreError`; nothing it did is kept."""

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """The connection of one :meth:`snapshot`: what a read of the read models runs its
        SQL on (read-only, one consistent view)."""
        with self.snapshot() as uow:
            yield uow.connection

    @abc.abstractmethod
    def may_write(self) -> bool:
        """Whether this store's credentials may move checkpoints (a writer, not a reader)."""

    @abc.abstractmethod
    def appends(self) -> AbstractContextManager[AppendSignal]:
        """A signal of appends committed while the block runs, for a tailing reader that
        would otherwise poll (the projector's ``run_forever``)."""

    @abc.abstractmethod
    def outside_transaction(self) -> AbstractContextManager[Connection]:
        """An autocommit connection for statements that cannot run in a transaction
        (``VACUUM`` of a read model's tables). Refused, as :attr:`UnitOfWork.connection` is,
        by an adapter without SQL."""

    def close(self) -> None:  # noqa: B027 - an adapter holding nothing has nothing to release
        """Release the adapter's resources (pooled connections); the store is done."""

    @abc.abstractmethod
    def stored_event_ids(self, event_ids: Collection[UUID]) -> set[UUID]:
        """Which of ``event_ids`` the store holds (a watcher's drift repair)."""

    def append(
        self,
        events: Sequence[Envelope],
        *,
        expected_versions: Mapping[str, int] | None = None,
    ) -> AppendResult:
        """Append one batch in its own transaction.

        A conflicting duplicate refuses the batch, but the evidence is kept: the offending
        event is recorded as a dead letter (in a transaction of its own) before the error
        propagates.
        """
        try:
            with self.transaction() as uow:
                return uow.append(events, expected_versions=expected_versions)
        except DuplicateEventConflict as exc:
            bad = next(e for e in events if e.event_id == exc.event_id)
            with self.transaction() as uow:
                uow.record_dead_letter(
                    source=bad.source,
                    reason="conflicting-duplicate",
                    error=str(exc),
                    payload=bad.to_json(),
                )
            raise

    @abc.abstractmethod
    def read_stream(self, stream: str, *, after_version: int = 0) -> list[RecordedEvent]: ...

    @abc.abstractmethod
    def read_after(self, position: int, *, limit: int = 1000) -> list[RecordedEvent]:
        """Events with position > ``position`` in position order, gap-safe for tailing."""

    @abc.abstractmethod
    def read_by_type(
        self,
        types: Sequence[str],
        *,
        occurred_from: datetime | None = None,
        occurred_to: datetime | None = None,
        after_position: int = 0,
        limit: int = 1000,
    ) -> list[RecordedEvent]: ...

    @abc.abstractmethod
    def head_position(self) -> int: ...

    @abc.abstractmethod
    def stream_version(self, stream: str) -> int: ...

    @abc.abstractmethod
    def verify(self, *, batch: int = 10_000) -> VerifyResult: ...

    @abc.abstractmethod
    def dead_letters(
        self, *, include_resolved: bool = False, after_id: int = 0, limit: int | None = None
    ) -> list[DeadLetter]:
        """Oldest first: ids above ``after_id``, at most ``limit`` (None: all)."""

    @abc.abstractmethod
    def dead_letter(self, letter_id: int) -> DeadLetter | None: ...

    @abc.abstractmethod
    def resolve_dead_letter(self, letter_id: int) -> None: ...

    def iter_all(self, *, after: int = 0, page: int = 5000) -> Iterator[RecordedEvent]:
        """Every event after ``after``, paging through :meth:`read_after`."""
        position = after
        while True:
            rows = self.read_after(position, limit=page)
            if not rows:
                return
            yield from rows
            position = rows[-1].position


def read_all_of_types(
    source: EventStore | UnitOfWork, types: Sequence[str], *, upto: int | None = None
) -> list[RecordedEvent]:
    """Every event of ``types`` (up to position ``upto``; default the head), in position
    order: from a store, page by page; from a unit of work that decides on them (it may
    hold the append lock, so it reads on its own connection rather than take another),
    in one read."""
    if isinstance(source, UnitOfWork):
        return source.read_window(0, source.head_position() if upto is None else upto, types)
    out: list[RecordedEvent] = []
    position = 0
    while True:
        page = source.read_by_type(types, after_position=position, limit=1000)
        if not page:
            return out
        out.extend(r for r in page if upto is None or r.position <= upto)
        position = page[-1].position
