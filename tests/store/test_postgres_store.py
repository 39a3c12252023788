"""The PostgreSQL adapter against the store contract, plus its database-level guarantees."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from tests.databases import TemplateDatabases
from tests.factories import occupancy_started
from tests.store.contract import EventStoreContract


class TestPostgresContract(EventStoreContract):
    pass


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


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=60), max_size=12), max_size=6))
def test_any_sequence_of_batches_reads_back_identical(
    databases: TemplateDatabases, batches: list[list[int]]
) -> None:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        expected = []
        seen = set()
        for numbers in batches:
            batch = [occupancy_started(n, job=f"j{n % 5}") for n in numbers]
            store.append(batch)
            for e in batch:
                if e.event_id not in seen:
                    seen.add(e.event_id)
                    expected.append(e)
        assert [r.envelope for r in store.iter_all(page=7)] == expected
        for stream in {e.stream for e in expected}:
            assert [r.envelope for r in store.read_stream(stream)] == [
                e for e in expected if e.stream == stream
            ]
        assert store.verify().ok
    finally:
        store.close()
        databases.drop(url)
