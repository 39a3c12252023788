"""The PostgreSQL adapter against the store contract, plus its database-level guarantees
(the triggers and grants that refuse edits, and verify finding edits made past them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from sqlalchemy import text

from ledger.canonical import canonical_json
from ledger.store.base import EventStore
from ledger.store.postgres import PostgresEventStore
from tests.ledger.store.contract import EventStoreContract, NewStore
from tests.support.databases import TemplateDatabases
from tests.support.factories import job_succeeded, occupancy_started
from tests.support.memory_store import MemoryEventStore, _Row


class TestPostgresContract(EventStoreContract):
    """``store`` is the shared fixture of ``tests/conftest.py``: a fresh migrated clone."""

    @pytest.fixture
    def new_store(self, databases: TemplateDatabases) -> NewStore:
        @contextmanager
        def new() -> Iterator[EventStore]:
            url = databases.clone()
            store = PostgresEventStore(url)
            try:
                yield store
            finally:
                store.close()
                databases.drop(url)

        return new


def _psql(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("+psycopg", ""), autocommit=True)


@pytest.mark.parametrize(
    "statement",
    ["UPDATE events SET type = 'x'", "DELETE FROM events", "TRUNCATE events"],
)
def test_database_refuses_mutation(
    store: PostgresEventStore, database_url: str, statement: str
) -> None:
    store.append([occupancy_started(1)])
    with _psql(database_url) as conn, pytest.raises(psycopg.Error) as info:
        conn.execute(statement)
    assert 'table "events" is append-only' in str(info.value)
    assert store.head_position() == 1


def test_app_role_holds_no_mutating_grant(store: PostgresEventStore) -> None:
    with store.engine.connect() as conn:
        privileges = {
            p
            for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
            if conn.execute(
                text("SELECT has_table_privilege('dlc_ledger_app', 'events', :p)"), {"p": p}
            ).scalar_one()
        }
    assert privileges == {"SELECT", "INSERT"}


def _tamper(url: str, statement: str) -> None:
    with _psql(url) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        conn.execute(statement)
        conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")


def test_verify_finds_a_tampered_payload(store: PostgresEventStore, database_url: str) -> None:
    store.append([occupancy_started(n) for n in range(20)])
    _tamper(
        database_url,
        "UPDATE events SET data = jsonb_set(data, '{mgpu}', '8000') WHERE position = 13",
    )
    result = store.verify(batch=5)
    assert not result.ok
    assert result.broken_at == 13
    assert "13" in result.detail


def test_verify_finds_a_deleted_row(store: PostgresEventStore, database_url: str) -> None:
    store.append([occupancy_started(n) for n in range(10)])
    _tamper(database_url, "DELETE FROM events WHERE position = 4")
    result = store.verify()
    assert result.broken_at == 4
    assert "missing" in result.detail


def test_verify_finds_a_rewritten_recorded_time(
    store: PostgresEventStore, database_url: str
) -> None:
    store.append([occupancy_started(n) for n in range(3)])
    _tamper(
        database_url,
        "UPDATE events SET recorded_at = recorded_at - interval '1 day' WHERE position = 2",
    )
    assert store.verify().broken_at == 2


def test_the_in_memory_adapter_verifies_the_chain_postgres_wrote(
    store: PostgresEventStore,
) -> None:
    # one canonical JSON and one chain for both adapters: PostgreSQL's rows, hashes
    # included, loaded into the in-memory store verify there (and a changed one does not)
    store.append([occupancy_started(n, job=f"j{n % 3}") for n in range(12)])
    store.append([job_succeeded(n, job=f"j{n}") for n in range(3)])
    with store.engine.connect() as conn:
        hashes = [
            bytes(h) for (h,) in conn.execute(text("SELECT hash FROM events ORDER BY position"))
        ]
    memory = MemoryEventStore()
    rows = memory._tables.events
    for recorded, digest in zip(store.read_after(0), hashes, strict=True):
        rows.append(_Row(tuple(recorded[:12]), canonical_json(recorded.data), digest))
    result = memory.verify()
    assert (result.ok, result.checked) == (True, 15)
    rows[6] = rows[6]._replace(hash=hashes[5])
    assert memory.verify().broken_at == 7
