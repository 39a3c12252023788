"""The in-memory adapter of the event store: the port's guarantees without a database.

For domain and decision tests (and anything else that wants an event log but no
PostgreSQL): it passes the same contract tests as :mod:`ledger.store.postgres`
(``tests/ledger/store/contract.py``), stores the same canonical JSON and chains the same
hashes (:mod:`ledger.store.chain`), so ``verify`` means the same here.

Concurrency mirrors the PostgreSQL adapter's append lock, a little coarser: a
transaction takes the store's writer lock at its first write (an append, a checkpoint
or dead letter written, a checkpoint read ``for_update``) and holds it until it commits
or rolls back, so writers are serialised, positions are dense and assigned in commit
order, and a tailing reader never skips. Readers never wait for a writer's transaction,
only for the instant its changes are published. A transaction that writes while its own
thread holds the writer lock in another one would wait forever (PostgreSQL would too);
here it is refused with :class:`~ledger.store.base.StoreError` instead.

There are no read models: :attr:`MemoryUnitOfWork.connection` (and
:meth:`MemoryEventStore.outside_transaction`) refuse, so use cases that read or write SQL
tables keep their PostgreSQL tests. The reads of a unit of work see what its transaction
sees: the committed events then its own staged ones; a :meth:`MemoryEventStore.snapshot`
sees the events and checkpoints committed when it opened, however many commit after.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

import orjson

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
    OnConflict,
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

__all__ = ["MemoryEventStore", "MemoryLeases", "MemoryUnitOfWork"]

#: As the PostgreSQL adapter keeps it: a dead letter's error text is bounded.
_ERROR_LIMIT = 4000

_NO_SQL = (
    "the in-memory event store has no database connection: "
    "read models and SQL need the PostgreSQL adapter"
)


class _Row(NamedTuple):
    """One stored event: RecordedEvent's fields but ``data`` as its canonical JSON.

    The payload is kept as bytes and decoded on every read, as PostgreSQL's JSONB is,
    so no reader can change what is stored by mutating what it was given.
    """

    columns: tuple[Any, ...]  # RecordedEvent's fields up to (without) data
    data_json: bytes
    hash: bytes

    @property
    def position(self) -> int:
        return int(self.columns[0])

    def recorded(self) -> RecordedEvent:
        return RecordedEvent._make((*self.columns, orjson.loads(self.data_json)))

    def fact_hash(self) -> bytes:
        _, _, _, _, type_, schema_version, stream, occurred_at = self.columns[:8]
        return stored_fact_hash(
            type_, schema_version, stream, occurred_at, orjson.Fragment(self.data_json)
        )


@dataclass(slots=True)
class _Tables:
    """The store's contents; a transaction stages a second, partial one."""

    events: list[_Row] = field(default_factory=list)  # index = position - 1
    positions: dict[UUID, int] = field(default_factory=dict)  # event_id -> position
    streams: dict[str, list[int]] = field(default_factory=dict)  # positions; index = version - 1
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    # names deleted by a transaction: published before its checkpoints, so a checkpoint
    # deleted then saved again by one transaction is there after it
    dropped: set[str] = field(default_factory=set)
    letters: dict[int, DeadLetter] = field(default_factory=dict)
    fingerprints: dict[tuple[str, bytes], int] = field(default_factory=dict)  # source, payload


class MemoryUnitOfWork(UnitOfWork):
    """One transaction: changes are staged and published together at commit.

    ``read_only`` (a snapshot): the committed events and checkpoints as they were when it
    was made, and every write refused.
    """

    def __init__(self, store: MemoryEventStore, *, read_only: bool = False) -> None:
        self._store = store
        self._staged = _Tables()
        self._locked = False
        self._read_only = read_only
        self._seen: tuple[int, dict[str, Checkpoint]] | None = None
        if read_only:
            with store._published:
                self._seen = (len(store._tables.events), dict(store._tables.checkpoints))

    @property
    def connection(self) -> Any:
        raise StoreError(_NO_SQL)

    # -- the view of this transaction: committed, then staged -------------------------------

    def _lock(self) -> None:
        if self._read_only:
            raise StoreError("a snapshot of the store is read-only")
        if not self._locked:
            self._store._acquire_writer()
            self._locked = True

    def lock_appends(self) -> None:
        # the writer lock, held until the unit ends, as every write here takes it
        self._lock()

    def _head(self) -> tuple[int, bytes]:
        if self._staged.events:
            last = self._staged.events[-1]
            return last.position, last.hash
        committed = self._committed()
        if not committed:
            return 0, GENESIS_HASH
        return committed, self._store._tables.events[committed - 1].hash

    def _committed(self) -> int:
        """How many committed events this unit sees (with staged events, the writer lock
        is held, so none can commit meanwhile)."""
        if self._seen is not None:
            return self._seen[0]
        with self._store._published:
            return len(self._store._tables.events)

    def _row(self, position: int) -> _Row:
        committed = self._store._tables.events
        if position <= len(committed):
            return committed[position - 1]
        return self._staged.events[position - len(committed) - 1]

    def _version(self, stream: str) -> int:
        committed = self._store._tables.streams.get(stream, ())
        return len(committed) + len(self._staged.streams.get(stream, ()))

    def _stored_row(self, event_id: UUID) -> _Row | None:
        position = self._staged.positions.get(event_id)
        if position is None:
            position = self._store._tables.positions.get(event_id)
        return self._row(position) if position is not None else None

    def _checkpoint(self, name: str) -> Checkpoint | None:
        staged = self._staged.checkpoints.get(name)
        if staged is not None or name in self._staged.dropped:
            return staged
        return self._committed_checkpoints().get(name)

    def _committed_checkpoints(self) -> dict[str, Checkpoint]:
        return self._store._tables.checkpoints if self._seen is None else self._seen[1]

    def _letter_id(self, key: tuple[str, bytes]) -> int | None:
        staged = self._staged.fingerprints.get(key)
        return staged if staged is not None else self._store._tables.fingerprints.get(key)

    def _letter(self, letter_id: int) -> DeadLetter | None:
        staged = self._staged.letters.get(letter_id)
        return staged if staged is not None else self._store._tables.letters.get(letter_id)

    # -- the port ---------------------------------------------------------------------------

    def append(
        self,
        events: Sequence[Envelope],
        *,
        expected_versions: Mapping[str, int] | None = None,
        on_conflict: OnConflict = "raise",
    ) -> AppendResult:
        if not events and not expected_versions:
            return AppendResult(())
        self._lock()
        conflicts: list[Envelope] = []

        def conflict(envelope: Envelope) -> None:
            if on_conflict == "raise":
                raise DuplicateEventConflict(envelope.event_id)
            conflicts.append(envelope)

        # the PostgreSQL adapter's order of refusals: a conflict within the batch, then a
        # stream not at its expected version, then an id stored with another fact
        duplicates: list[UUID] = []
        batch = dedupe_batch(events, duplicates, conflict)
        for stream, expected in (expected_versions or {}).items():
            actual = self._version(stream)
            if actual != expected:
                raise ConcurrencyConflict(stream, expected, actual)
        fresh: list[tuple[Envelope, bytes]] = []
        for envelope, data_json in batch:
            stored = self._stored_row(envelope.event_id)
            if stored is None:
                fresh.append((envelope, data_json))
            elif stored.fact_hash() == fact_hash(envelope, data_json):
                duplicates.append(envelope.event_id)
            else:
                conflict(envelope)

        # nothing below can fail: stage the batch
        for envelope in conflicts:
            self._dead_letter_conflict(envelope)
        positions = self._stage(fresh) if fresh else ()
        return AppendResult(positions, tuple(duplicates))

    def _stage(self, batch: list[tuple[Envelope, bytes]]) -> tuple[int, ...]:
        staged = self._staged
        position, previous = self._head()
        recorded_at = datetime.now(UTC)
        positions = []
        for envelope, data_json in batch:
            position += 1
            version = self._version(envelope.stream) + 1
            previous = record_hash(previous, position, version, recorded_at, envelope, data_json)
            columns = (
                position,
                version,
                recorded_at,
                envelope.event_id,
                envelope.type,
                envelope.schema_version,
                envelope.stream,
                envelope.occurred_at,
                envelope.observed_at,
                envelope.source,
                envelope.causation_id,
                envelope.correlation_id,
            )
            staged.events.append(_Row(columns, data_json, previous))
            staged.positions[envelope.event_id] = position
            staged.streams.setdefault(envelope.stream, []).append(position)
            positions.append(position)
        return tuple(positions)

    # -- reads in this transaction ----------------------------------------------------------

    def head_position(self) -> int:
        return self._head()[0]

    def read_window(
        self, after: int, upto: int, types: Collection[str] | None = None
    ) -> list[RecordedEvent]:
        wanted = None if types is None else frozenset(types)
        last = min(upto, self.head_position())
        rows = (self._row(p) for p in range(max(after, 0) + 1, last + 1))
        return [r.recorded() for r in rows if wanted is None or r.columns[4] in wanted]

    def _stream_positions(self, stream: str) -> list[int]:
        head = self.head_position()
        with self._store._published:
            committed = list(self._store._tables.streams.get(stream, ()))
        return [p for p in committed if p <= head] + self._staged.streams.get(stream, [])

    def read_stream(self, stream: str, *, upto: int | None = None) -> list[RecordedEvent]:
        positions = self._stream_positions(stream)
        if upto is not None:
            positions = [p for p in positions if p <= upto]
        return [self._row(p).recorded() for p in positions]

    def read_streams(self, streams: Collection[str], *, before: int) -> list[RecordedEvent]:
        positions = sorted(
            p for stream in set(streams) for p in self._stream_positions(stream) if p < before
        )
        return [self._row(p).recorded() for p in positions]

    def read_ids(self, event_ids: Collection[UUID]) -> list[RecordedEvent]:
        wanted = set(event_ids)
        head = self.head_position()
        return [
            self._row(p).recorded()
            for p in range(1, head + 1)
            if self._row(p).recorded().event_id in wanted
        ]

    def read_positions(self, positions: Collection[int]) -> list[RecordedEvent]:
        head = self.head_position()
        return [self._row(p).recorded() for p in sorted(set(positions)) if 0 < p <= head]

    def lock_checkpoints(self, names: Collection[str]) -> dict[str, int]:
        self._lock()
        positions = {}
        for name in sorted(names):
            found = self._checkpoint(name)
            if found is None:
                found = Checkpoint(name, 0, {}, datetime.now(UTC))
                self._staged.checkpoints[name] = found
            positions[name] = found.position
        return positions

    def _dead_letter_conflict(self, envelope: Envelope) -> None:
        self.record_dead_letter(
            source=envelope.source,
            reason="conflicting-duplicate",
            error=str(DuplicateEventConflict(envelope.event_id)),
            payload=envelope.to_json(),
        )

    def load_checkpoint(self, name: str, *, for_update: bool = False) -> Checkpoint:
        if for_update:
            self._lock()
        found = self._checkpoint(name)
        if found is None:
            return Checkpoint(name)
        return replace(found, offsets=dict(found.offsets))

    def save_checkpoint(
        self, name: str, *, position: int | None = None, offsets: Mapping[str, int] | None = None
    ) -> None:
        self._lock()
        now = datetime.now(UTC)
        found = self._checkpoint(name)
        if found is None:
            saved = Checkpoint(name, position or 0, dict(offsets or {}), now)
        else:
            # offsets merge so partitions not in this batch keep theirs
            saved = Checkpoint(
                name,
                found.position if position is None else position,
                {**found.offsets, **offsets} if offsets is not None else found.offsets,
                now,
            )
        self._staged.checkpoints[name] = saved

    def checkpoints(self, prefix: str) -> list[Checkpoint]:
        with self._store._published:
            names = [n for n in self._committed_checkpoints() if n.startswith(prefix)]
        names += [n for n in self._staged.checkpoints if n.startswith(prefix)]
        found = (self.load_checkpoint(name) for name in sorted(set(names)))
        return [checkpoint for checkpoint in found if checkpoint.updated_at is not None]

    def delete_checkpoints(self, prefix: str) -> None:
        self._lock()
        for checkpoint in self.checkpoints(prefix):
            self._staged.checkpoints.pop(checkpoint.name, None)
            self._staged.dropped.add(checkpoint.name)

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
        self._lock()
        now = datetime.now(UTC)
        key = (source, bytes(payload))
        letter_id = self._letter_id(key)
        earlier = self._letter(letter_id) if letter_id is not None else None
        if earlier is not None:
            # the same message again: one letter, counted, open again
            letter = replace(
                earlier,
                last_seen=now,
                count=earlier.count + 1,
                error=error[:_ERROR_LIMIT],
                reason=reason,
                resolved_at=None,
            )
        else:
            letter = DeadLetter(
                id=self._store._next_letter_id(),
                source=source,
                reason=reason,
                error=error[:_ERROR_LIMIT],
                payload=bytes(payload),
                topic=topic,
                partition=partition,
                offset=offset,
                first_seen=now,
                last_seen=now,
                count=1,
                resolved_at=None,
            )
        self._staged.letters[letter.id] = letter
        self._staged.fingerprints[key] = letter.id
        return letter.id

    def _resolve(self, letter_id: int) -> None:
        self._lock()
        letter = self._letter(letter_id)
        if letter is not None:
            self._staged.letters[letter_id] = replace(letter, resolved_at=datetime.now(UTC))

    # -- commit -----------------------------------------------------------------------------

    def _commit(self) -> None:
        if self._locked:  # only a transaction that wrote holds the lock, or has changes
            self._store._publish(self._staged)

    def _release(self) -> None:
        self._staged = _Tables()
        if self._locked:
            self._locked = False
            self._store._release_writer()


class _MemoryLease(Lease):
    def __init__(self, owner: MemoryLeases, name: str) -> None:
        self._owner = owner
        self.name = name

    def alive(self) -> bool:
        return self._owner.holder(self.name) is self

    def release(self) -> None:
        self._owner.drop(self)


class MemoryLeases:
    """The in-memory store's leases: a name is held by one lease until it is released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Lease] = {}

    def try_take(self, name: str) -> Lease | None:
        with self._lock:
            if name in self._held:
                return None
            lease = _MemoryLease(self, name)
            self._held[name] = lease
            return lease

    def holder(self, name: str) -> Lease | None:
        with self._lock:
            return self._held.get(name)

    def drop(self, lease: Lease) -> None:
        with self._lock:
            if self._held.get(lease.name) is lease:
                del self._held[lease.name]


class MemoryEventStore(EventStore):
    """Event store in this process's memory; empty when created, gone when dropped."""

    def __init__(self) -> None:
        self._tables = _Tables()
        # held from a transaction's first write to its end (the append lock)
        self._writer = threading.Lock()
        self._writer_thread: int | None = None
        # held only while changes are published or a reader copies what it reads
        self._published = threading.Lock()
        self._letter_ids = 0
        # counts commits that appended events: what an AppendSignal waits to see change
        self._appended = threading.Condition()
        self._append_count = 0
        self._leases = MemoryLeases()

    def try_lease(self, name: str) -> Lease | None:
        return self._leases.try_take(name)

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[MemoryUnitOfWork]:
        uow = MemoryUnitOfWork(self)
        try:
            yield uow
            uow._commit()
        finally:
            uow._release()

    @contextmanager
    def snapshot(self) -> Iterator[MemoryUnitOfWork]:
        # holds no lock and stages nothing (every write is refused): nothing to release
        yield MemoryUnitOfWork(self, read_only=True)

    @contextmanager
    def appends(self) -> Iterator[AppendSignal]:
        yield _AppendSignal(self)

    def outside_transaction(self) -> AbstractContextManager[Any]:
        raise StoreError(_NO_SQL)

    def may_write(self) -> bool:
        return True  # no roles here: whoever holds the store may write it

    def _acquire_writer(self) -> None:
        if self._writer_thread == threading.get_ident():
            raise StoreError(
                "this thread already writes in another transaction of the in-memory store: "
                "a nested write transaction would wait for itself"
            )
        self._writer.acquire()
        self._writer_thread = threading.get_ident()

    def _release_writer(self) -> None:
        self._writer_thread = None
        self._writer.release()

    def _next_letter_id(self) -> int:
        # called under the writer lock; a rolled-back letter leaves a gap, as a sequence does
        self._letter_ids += 1
        return self._letter_ids

    def _publish(self, staged: _Tables) -> None:
        tables = self._tables
        with self._published:
            tables.events.extend(staged.events)
            tables.positions.update(staged.positions)
            for stream, positions in staged.streams.items():
                tables.streams.setdefault(stream, []).extend(positions)
            for name in staged.dropped:
                tables.checkpoints.pop(name, None)
            tables.checkpoints.update(staged.checkpoints)
            tables.letters.update(staged.letters)
            tables.fingerprints.update(staged.fingerprints)
        if staged.events:
            with self._appended:
                self._append_count += 1
                self._appended.notify_all()

    # -- reads ------------------------------------------------------------------------------

    def read_stream(self, stream: str, *, after_version: int = 0) -> list[RecordedEvent]:
        with self._published:
            positions = self._tables.streams.get(stream, [])[max(after_version, 0) :]
            rows = [self._tables.events[p - 1] for p in positions]
        return [row.recorded() for row in rows]

    def read_after(self, position: int, *, limit: int = 1000) -> list[RecordedEvent]:
        if limit < 0:
            raise Invalid(f"limit must not be negative, got {limit}")
        start = max(position, 0)
        with self._published:
            rows = self._tables.events[start : start + limit]
        return [row.recorded() for row in rows]

    def read_by_type(
        self,
        types: Sequence[str],
        *,
        occurred_from: datetime | None = None,
        occurred_to: datetime | None = None,
        after_position: int = 0,
        limit: int = 1000,
    ) -> list[RecordedEvent]:
        if limit < 0:
            raise Invalid(f"limit must not be negative, got {limit}")
        wanted = frozenset(types)
        with self._published:
            rows = self._tables.events[max(after_position, 0) :]
        found: list[RecordedEvent] = []
        for row in rows:
            if len(found) == limit:
                break
            type_, occurred_at = row.columns[4], row.columns[7]
            if (
                type_ in wanted
                and (occurred_from is None or occurred_at >= occurred_from)
                and (occurred_to is None or occurred_at < occurred_to)
            ):
                found.append(row.recorded())
        return found

    def head_position(self) -> int:
        with self._published:
            return len(self._tables.events)

    def stored_event_ids(self, event_ids: Collection[UUID]) -> set[UUID]:
        with self._published:
            return {event_id for event_id in event_ids if event_id in self._tables.positions}

    def stream_version(self, stream: str) -> int:
        with self._published:
            return len(self._tables.streams.get(stream, ()))

    def verify(self, *, batch: int = 10_000) -> VerifyResult:
        """Recompute the chain from the stored JSON, as the PostgreSQL adapter does."""
        if batch < 1:
            raise Invalid(f"batch must be at least 1, got {batch}")
        with self._published:
            rows = list(self._tables.events)  # everything stored when we began
        previous = GENESIS_HASH
        for checked, row in enumerate(rows):
            expected = checked + 1
            if row.position != expected:
                return VerifyResult(checked, expected, f"position {expected} is missing")
            recorded = row.recorded()
            digest = record_hash(
                previous,
                recorded.position,
                recorded.version,
                recorded.recorded_at,
                recorded.envelope,
            )
            if digest != row.hash:
                return VerifyResult(
                    checked,
                    row.position,
                    f"hash mismatch at position {row.position} (event {recorded.event_id})",
                )
            previous = digest
        return VerifyResult(len(rows))

    # -- dead letters -----------------------------------------------------------------------

    def dead_letters(
        self, *, include_resolved: bool = False, after_id: int = 0, limit: int | None = None
    ) -> list[DeadLetter]:
        """Oldest first: ids above ``after_id``, at most ``limit`` (None: all)."""
        with self._published:
            letters = sorted(self._tables.letters.values(), key=lambda letter: letter.id)
        chosen = [
            letter
            for letter in letters
            if letter.id > after_id and (include_resolved or letter.resolved_at is None)
        ]
        return chosen if limit is None else chosen[:limit]

    def dead_letter(self, letter_id: int) -> DeadLetter | None:
        with self._published:
            return self._tables.letters.get(letter_id)

    def resolve_dead_letter(self, letter_id: int) -> None:
        with self.transaction() as uow:
            uow._resolve(letter_id)


class _AppendSignal(AppendSignal):
    """Wakes when a commit that appended events was published after the last wait."""

    def __init__(self, store: MemoryEventStore) -> None:
        self._store = store
        with store._appended:
            self._seen = store._append_count

    def wait(self, timeout: float) -> bool:
        store = self._store
        with store._appended:
            appended = store._appended.wait_for(lambda: store._append_count != self._seen, timeout)
            self._seen = store._append_count
        return appended
