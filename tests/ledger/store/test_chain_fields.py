"""Every field the hash chain covers, pinned: a known digest, and a tamper test per field.

The tamper tests elsewhere change a stored event's type, payload, recorded time or
hash, so a chain link that silently dropped another field (``observed_at``, say) still
passed them. Here a fixed envelope hashes to digests computed once and written down,
and each field of a stored record is changed in turn, past the append-only trigger in
PostgreSQL and in place in the in-memory adapter: ``verify`` must break at that event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.types.json import Jsonb

from ledger.canonical import canonical_json
from ledger.envelopes import Envelope, make_envelope
from ledger.events import JobFailed, JobSucceeded, OccupancyStarted
from ledger.store.base import EventStore, RecordedEvent
from ledger.store.chain import GENESIS_HASH, fact_hash, record_hash, stored_fact_hash
from ledger.store.postgres import PostgresEventStore
from tests.support.databases import TemplateDatabases
from tests.support.factories import EPOCH
from tests.support.memory_store import MemoryEventStore

# --- known answers -----------------------------------------------------------------

ENVELOPE = Envelope(
    event_id=UUID("6f1c0a52-3d9e-4b8a-9c41-2e7d5b0f8a13"),
    type="JobSucceeded",
    schema_version=1,
    stream="job/j-1",
    occurred_at=datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC),
    observed_at=datetime(2026, 11, 1, 12, 0, 1, 500000, tzinfo=UTC),
    source="kube-watcher/test",
    causation_id=UUID("9a7b6c5d-4e3f-4a1b-8c2d-1e0f9a8b7c6d"),
    correlation_id=UUID("1d2c3b4a-5f6e-4d7c-9b8a-0f1e2d3c4b5a"),
    data={"job_uid": "j-1", "reason": "Completed"},
)
RECORDED_AT = datetime(2026, 11, 1, 12, 0, 2, 750000, tzinfo=UTC)

#: What the first link hashes after the genesis hash: every field, canonical JSON.
RECORD = (
    b'{"causation_id":"9a7b6c5d-4e3f-4a1b-8c2d-1e0f9a8b7c6d",'
    b'"correlation_id":"1d2c3b4a-5f6e-4d7c-9b8a-0f1e2d3c4b5a",'
    b'"data":{"job_uid":"j-1","reason":"Completed"},'
    b'"event_id":"6f1c0a52-3d9e-4b8a-9c41-2e7d5b0f8a13",'
    b'"observed_at":"2026-11-01T12:00:01.500000Z","occurred_at":"2026-11-01T12:00:00.250000Z",'
    b'"position":1,"recorded_at":"2026-11-01T12:00:02.750000Z","schema_version":1,'
    b'"source":"kube-watcher/test","stream":"job/j-1","type":"JobSucceeded","version":1}'
)
FIRST_LINK = "bca35deefdda19c6616a02603a630cfc4a47103a6ee45cef1c603ceb80aa878f"
#: The same event without causation or correlation ids, second in the chain.
SECOND_LINK = "0e325ba99a7f54e511a76ed79291955e99bfb3b251600507f2f0f0de55b08cd0"
#: The fact (type, schema version, stream, occurred_at, data) that dedupe compares.
FACT = "666e4fe304cf927e1d9dfae75dd5d68693881ef0ac64c455fb08f66d94d19d12"


def test_a_fixed_record_hashes_to_the_known_digest() -> None:
    assert hashlib.sha256(GENESIS_HASH + RECORD).hexdigest() == FIRST_LINK
    first = record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, ENVELOPE)
    assert first.hex() == FIRST_LINK
    bare = ENVELOPE.model_copy(update={"causation_id": None, "correlation_id": None})
    assert record_hash(first, 2, 2, RECORDED_AT, bare).hex() == SECOND_LINK
    # the payload passed pre-serialised hashes alike
    data_json = canonical_json(ENVELOPE.data)
    assert record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, ENVELOPE, data_json).hex() == FIRST_LINK


def test_a_fixed_fact_hashes_to_the_known_digest() -> None:
    assert fact_hash(ENVELOPE).hex() == FACT
    assert fact_hash(ENVELOPE, canonical_json(ENVELOPE.data)).hex() == FACT
    stored = stored_fact_hash("JobSucceeded", 1, "job/j-1", ENVELOPE.occurred_at, ENVELOPE.data)
    assert stored.hex() == FACT


# --- each field, in the digests ----------------------------------------------------

OTHER_ID = UUID("00000000-0000-4000-8000-000000000001")
SHIFTED = timedelta(microseconds=1)

#: One changed value per envelope field.
ENVELOPE_CHANGES: dict[str, Any] = {
    "event_id": OTHER_ID,
    "type": "JobFailed",
    "schema_version": 2,
    "stream": "job/j-2",
    "occurred_at": ENVELOPE.occurred_at + SHIFTED,
    "observed_at": ENVELOPE.observed_at + SHIFTED,
    "source": "kube-watcher/other",
    "causation_id": OTHER_ID,
    "correlation_id": OTHER_ID,
    "data": {"job_uid": "j-1", "reason": "Error"},
}
#: The fields of the fact: a re-list may observe the same fact at another time, from
#: another source, under other causation, so those are not part of it.
FACT_FIELDS = {"type", "schema_version", "stream", "occurred_at", "data"}


@pytest.mark.parametrize(("field", "value"), ENVELOPE_CHANGES.items(), ids=list(ENVELOPE_CHANGES))
def test_every_envelope_field_is_in_the_link(field: str, value: Any) -> None:
    # compared with the link as computed now, not the known digest: a field left out
    # of the link changes that digest, but then makes the two links here equal
    link = record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, ENVELOPE)
    changed = ENVELOPE.model_copy(update={field: value})
    assert record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, changed) != link
    # absent ids are left out of the record, which still changes the link
    if field in ("causation_id", "correlation_id"):
        absent = ENVELOPE.model_copy(update={field: None})
        assert record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, absent) != link


@pytest.mark.parametrize(
    ("previous", "position", "version", "recorded_at"),
    [
        (b"\x01" * 32, 1, 1, RECORDED_AT),
        (GENESIS_HASH, 2, 1, RECORDED_AT),
        (GENESIS_HASH, 1, 2, RECORDED_AT),
        (GENESIS_HASH, 1, 1, RECORDED_AT + SHIFTED),
    ],
    ids=["previous hash", "position", "version", "recorded_at"],
)
def test_every_placement_of_the_record_is_in_the_link(
    previous: bytes, position: int, version: int, recorded_at: datetime
) -> None:
    link = record_hash(GENESIS_HASH, 1, 1, RECORDED_AT, ENVELOPE)
    assert record_hash(previous, position, version, recorded_at, ENVELOPE) != link


@pytest.mark.parametrize(("field", "value"), ENVELOPE_CHANGES.items(), ids=list(ENVELOPE_CHANGES))
def test_the_fact_covers_the_fact_fields_only(field: str, value: Any) -> None:
    changed = ENVELOPE.model_copy(update={field: value})
    assert (fact_hash(changed) != fact_hash(ENVELOPE)) == (field in FACT_FIELDS)


# --- each field, tampered in a store -----------------------------------------------

FORGED_ID = UUID("00000000-0000-4000-8000-00000000f0f0")


def _stored() -> list[Envelope]:
    """Three events; the second, the one tampered with, carries every optional field."""
    first = make_envelope(
        JobSucceeded(job_uid="j-0"), event_id=UUID("00000000-0000-4000-8000-0000000000a1"),
        stream="job/j-0", occurred_at=EPOCH, observed_at=EPOCH, source="kube-watcher/test",
    )  # fmt: skip
    pod = OccupancyStarted(
        occupancy_id="pod-1", job_uid="j-1", pod_uid="pod-1", pod_name="j-1-0", node="n1",
        mgpu=1000, cpu_milli=8000, memory_mib=16384, workspace="ws-a",
        started_at=EPOCH + timedelta(seconds=1),
    )  # fmt: skip
    second = make_envelope(
        pod,
        event_id=UUID("00000000-0000-4000-8000-0000000000a2"),
        stream="job/j-1",
        occurred_at=EPOCH + timedelta(seconds=1),
        observed_at=EPOCH + timedelta(seconds=2),
        source="kube-watcher/test",
        causation_id=UUID("00000000-0000-4000-8000-0000000000c1"),
        correlation_id=UUID("00000000-0000-4000-8000-0000000000c2"),
    )
    third = make_envelope(
        JobFailed(job_uid="j-1", reason="Error"),
        event_id=UUID("00000000-0000-4000-8000-0000000000a3"),
        stream="job/j-1",
        occurred_at=EPOCH + timedelta(seconds=3),
        observed_at=EPOCH + timedelta(seconds=3),
        source="kube-watcher/test",
    )
    return [first, second, third]


#: Per stored column of the events table: its forged value, from the stored event.
FORGERIES: dict[str, Callable[[RecordedEvent], Any]] = {
    "event_id": lambda e: FORGED_ID,
    "type": lambda e: "OccupancyEnded",
    "schema_version": lambda e: e.schema_version + 1,
    "stream": lambda e: "job/j-forged",
    "occurred_at": lambda e: e.occurred_at + SHIFTED,
    "observed_at": lambda e: e.observed_at + SHIFTED,
    "source": lambda e: "kube-watcher/forged",
    "causation_id": lambda e: FORGED_ID,
    "correlation_id": lambda e: FORGED_ID,
    "data": lambda e: {**e.data, "mgpu": 8000},
    "version": lambda e: e.version + 10,
    "recorded_at": lambda e: e.recorded_at + SHIFTED,
}
#: Optional ids forged to absent (NULL): the record leaves them out, the link differs.
CLEARED = ("causation_id", "correlation_id")


def _psql(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url.replace("+psycopg", ""), autocommit=True)


class Tamper:
    """Rewrites stored columns of one event in a store, past its append-only guard."""

    def __init__(self, store: EventStore, url: str | None) -> None:
        self.store = store
        self.url = url

    def event(self, position: int) -> RecordedEvent:
        (recorded,) = [e for e in self.store.read_after(0) if e.position == position]
        return recorded

    def set(self, position: int, column: str, value: Any) -> None:
        if self.url is not None:
            with _psql(self.url) as conn:
                conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
                conn.execute(
                    f"UPDATE events SET {column} = %s WHERE position = %s",
                    (Jsonb(value) if column == "data" else value, position),
                )
                conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
            return
        assert isinstance(self.store, MemoryEventStore)
        rows = self.store._tables.events
        row = rows[position - 1]
        if column == "data":
            rows[position - 1] = row._replace(data_json=canonical_json(value))
        elif column == "hash":
            rows[position - 1] = row._replace(hash=value)
        else:
            index = RecordedEvent._fields.index(column)
            columns = (*row.columns[:index], value, *row.columns[index + 1 :])
            rows[position - 1] = row._replace(columns=columns)


@pytest.fixture(params=["postgres", "memory"])
def tamper(request: pytest.FixtureRequest, databases: TemplateDatabases) -> Iterator[Tamper]:
    """A store holding :func:`_stored`, verified intact, and the means to edit it."""
    if request.param == "memory":
        store: EventStore = MemoryEventStore()
        url = None
    else:
        url = databases.clone()
        store = PostgresEventStore(url)
    try:
        store.append(_stored())
        assert store.verify().ok
        yield Tamper(store, url)
    finally:
        store.close()
        if url is not None:
            databases.drop(url)


def _broken_at(tamper: Tamper) -> tuple[int | None, str]:
    result = tamper.store.verify(batch=2)
    assert not result.ok
    return result.broken_at, result.detail


@pytest.mark.parametrize("column", FORGERIES)
def test_verify_finds_each_stored_field_changed(tamper: Tamper, column: str) -> None:
    tamper.set(2, column, FORGERIES[column](tamper.event(2)))
    broken_at, detail = _broken_at(tamper)
    assert broken_at == 2
    assert detail.startswith("hash mismatch at position 2 ")


@pytest.mark.parametrize("column", CLEARED)
def test_verify_finds_an_optional_id_cleared(tamper: Tamper, column: str) -> None:
    tamper.set(2, column, None)
    assert _broken_at(tamper)[0] == 2


def test_verify_finds_a_stored_hash_replaced(tamper: Tamper) -> None:
    tamper.set(2, "hash", hashlib.sha256(b"forged").digest())
    assert _broken_at(tamper)[0] == 2


def test_verify_finds_an_edit_whose_link_was_recomputed_by_the_next_link(tamper: Tamper) -> None:
    """The previous hash is in each link: forging event 1 and its hash breaks event 2."""
    first = tamper.event(1)
    forged = first._replace(source="kube-watcher/forged")
    tamper.set(1, "source", forged.source)
    link = record_hash(GENESIS_HASH, 1, forged.version, forged.recorded_at, forged.envelope)
    tamper.set(1, "hash", link)
    assert _broken_at(tamper)[0] == 2


def test_verify_finds_two_events_swapped(tamper: Tamper) -> None:
    """Events 2 and 3 trading places, hashes and all, break the chain at 2.

    A position cannot change alone (verify wants them contiguous), so this is caught by
    the previous hash as much as by the position in the link; the known digest and
    ``test_every_placement_of_the_record_is_in_the_link`` pin the position itself.
    """
    second, third = tamper.event(2), tamper.event(3)
    if tamper.url is not None:
        tamper.set(2, "position", 1_000_002)
        tamper.set(3, "position", 2)
        tamper.set(1_000_002, "position", 3)
    else:
        assert isinstance(tamper.store, MemoryEventStore)
        rows = tamper.store._tables.events
        rows[1], rows[2] = rows[2], rows[1]
        tamper.set(2, "position", 2)
        tamper.set(3, "position", 3)
    assert [tamper.event(2).event_id, tamper.event(3).event_id] == [third.event_id, second.event_id]
    assert _broken_at(tamper)[0] == 2


def test_rewriting_a_field_to_its_own_value_leaves_the_chain_intact(tamper: Tamper) -> None:
    """The tampering itself breaks nothing: only a changed value does."""
    for column in FORGERIES:
        tamper.set(2, column, getattr(tamper.event(2), column))
    assert tamper.store.verify().ok
