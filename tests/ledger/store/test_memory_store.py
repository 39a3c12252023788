"""The in-memory adapter against the store contract, plus what only it has to prove.

Its "database-level" guarantee is verify: the PostgreSQL tests edit rows past the
trigger; here the stored rows are edited in place, and verify must find each edit at
its position, as it does there.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ledger.store.base import EventStore, StoreError
from tests.ledger.store.contract import EventStoreContract, NewStore
from tests.support.factories import occupancy_started
from tests.support.memory_store import MemoryEventStore


class TestMemoryContract(EventStoreContract):
    @pytest.fixture
    def store(self) -> MemoryEventStore:
        return MemoryEventStore()

    @pytest.fixture
    def new_store(self) -> NewStore:
        @contextmanager
        def new() -> Iterator[EventStore]:
            yield MemoryEventStore()

        return new


def _edit(store: MemoryEventStore, position: int, **changes: Any) -> None:
    rows = store._tables.events
    rows[position - 1] = rows[position - 1]._replace(**changes)


def test_verify_finds_a_tampered_payload() -> None:
    store = MemoryEventStore()
    store.append([occupancy_started(n) for n in range(20)])
    row = store._tables.events[12]
    _edit(store, 13, data_json=row.data_json.replace(b'"mgpu":1000', b'"mgpu":8000'))
    result = store.verify(batch=5)
    assert (result.broken_at, result.checked) == (13, 12)
    assert "13" in result.detail


def test_verify_finds_a_deleted_event() -> None:
    store = MemoryEventStore()
    store.append([occupancy_started(n) for n in range(10)])
    del store._tables.events[3]
    result = store.verify()
    assert result.broken_at == 4
    assert "missing" in result.detail


def test_verify_finds_a_rewritten_recorded_time() -> None:
    store = MemoryEventStore()
    store.append([occupancy_started(n) for n in range(3)])
    columns = store._tables.events[1].columns
    earlier = columns[2].replace(year=columns[2].year - 1)
    _edit(store, 2, columns=(*columns[:2], earlier, *columns[3:]))
    assert store.verify().broken_at == 2


def test_there_is_no_connection_to_write_read_models_on() -> None:
    store = MemoryEventStore()
    with store.transaction() as uow, pytest.raises(StoreError, match="PostgreSQL adapter"):
        _ = uow.connection
    with pytest.raises(StoreError, match="PostgreSQL adapter"), store.outside_transaction():
        pass


def test_a_nested_write_transaction_is_refused_not_deadlocked() -> None:
    store = MemoryEventStore()
    with store.transaction() as outer:
        outer.append([occupancy_started(1)])
        with pytest.raises(StoreError, match="nested write transaction"):
            store.append([occupancy_started(2)])
        with store.transaction() as reader:  # reading a checkpoint needs no lock
            assert reader.load_checkpoint("x").position == 0
    assert store.head_position() == 1
    store.append([occupancy_started(2)])  # the lock was released
    assert store.head_position() == 2


def test_a_writer_waits_for_the_open_write_transaction() -> None:
    store = MemoryEventStore()
    started, done = threading.Event(), threading.Event()

    def other_writer() -> None:
        started.set()
        store.append([occupancy_started(2)])
        done.set()

    with store.transaction() as uow:
        uow.append([occupancy_started(1)])
        thread = threading.Thread(target=other_writer)
        thread.start()
        started.wait()
        assert not done.wait(0.2)  # serialised behind this transaction
    thread.join(5)
    assert [r.data["occupancy_id"] for r in store.read_after(0)] == ["pod-1", "pod-2"]


def test_needs_no_database_driver() -> None:
    # the port names SQLAlchemy's Connection (read models are SQL by design), so SQLAlchemy's
    # types load with it; the fake still opens no database and loads no driver or adapter
    code = (
        "import sys; import tests.support.memory_store; "
        "print(sorted(m for m in ('psycopg', 'ledger.store.postgres', 'ledger.store.engines')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
