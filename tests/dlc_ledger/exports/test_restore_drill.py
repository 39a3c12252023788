"""The restore drill of docs/operations.md, command by command: export a billed store, import
it into a new database (no schema yet), project, verify; every event comes back exactly, the
read models rebuild row for row, the reports and invoices say the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from dlc_ledger.wiring import context
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.clis import CliCall, cli_caller
from tests.support.databases import TemplateDatabases
from tests.support.exports import Seeded
from tests.support.tables import snapshot

_ROWS = text(
    "SELECT position, event_id, stream, version, type, schema_version, occurred_at, "
    "observed_at, recorded_at, source, causation_id, correlation_id, data::text, hash "
    "FROM events ORDER BY position"
)
#: what an operator compares after a restore (docs/operations.md, "The restore drill")
REPORTS = (
    ("report", "cost", "--group-by", "workspace", "--format", "json"),
    ("report", "usage", "--group-by", "workspace", "--format", "json"),
    ("invoices", "list", "--limit", "10000", "--format", "json"),
    ("ledger", "balance", "--format", "json"),
    ("subscriptions", "list", "--format", "json"),
    ("jobs", "list", "--limit", "10000", "--format", "json"),
)


def _cli_on(url: str, monkeypatch: pytest.MonkeyPatch) -> CliCall:
    monkeypatch.setenv("DATABASE_URL", url)
    context.settings.cache_clear()
    return cli_caller()


def _events(store: PostgresEventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(_ROWS)]


def _checkpoints(store: PostgresEventStore) -> dict[str, int]:
    with store.snapshot() as uow:
        return {c.name: c.position for c in uow.checkpoints("projection:")}


def test_export_import_project_gives_back_the_same_ledger(
    seeded: Seeded,
    databases: TemplateDatabases,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head = seeded.store.head_position()
    original = _cli_on(seeded.url, monkeypatch)
    # as a running projector leaves them: its maintenance after a catch-up included (the
    # quota rollups, which the writes' own catch-up leaves to it)
    original("project")
    said = original("export", "--to", str(tmp_path / "backup"), "--per-file", "500")
    assert f"exported {head:,} events in 4 files" in said
    before = {" ".join(args): json.loads(original(*args)) for args in REPORTS}
    assert before["invoices list --limit 10000 --format json"]  # invoices were issued

    target = databases.empty()  # a new database: the import migrates it first
    try:
        restored_cli = _cli_on(target, monkeypatch)
        said = restored_cli("import", str(tmp_path / "backup"))
        assert f"imported {head:,} events from 4 files" in said
        restored = PostgresEventStore(target)
        try:
            assert _events(restored) == _events(seeded.store)  # every column, hashes included
            assert _checkpoints(restored) == {}  # the read models are not built yet
            restored_cli("project")
            assert f"chain intact: {head} events verified" in restored_cli("verify")

            projections = all_projections()
            assert snapshot(restored, projections) == snapshot(seeded.store, projections)
            assert set(_checkpoints(restored).values()) == {head}
            after = {" ".join(args): json.loads(restored_cli(*args)) for args in REPORTS}
            assert after == before
        finally:
            restored.close()
    finally:
        databases.drop(target)


def test_a_restore_into_a_store_that_holds_events_is_refused(
    exported: Path, store: PostgresEventStore, cli: CliCall
) -> None:
    from tests.support.factories import occupancy_started

    store.append([occupancy_started(1)])
    said = cli("import", str(exported), ok=False)
    assert "already holds events (head position 1)" in said
    assert store.head_position() == 1 and store.verify().ok


def test_a_bad_export_is_refused_before_the_new_database_is_touched(
    exported: Path,
    databases: TemplateDatabases,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for part in exported.glob("events-*.jsonl.gz"):  # the files without their manifest
        (broken / part.name).write_bytes(part.read_bytes())
    target = databases.empty()
    try:
        said = _cli_on(target, monkeypatch)("import", str(broken), ok=False)
        assert "bad manifest" in said and "did not finish" in said
        empty = PostgresEventStore(target)
        try:
            with empty.engine.connect() as conn:
                assert conn.execute(text("SELECT to_regclass('events')")).scalar() is None
        finally:
            empty.close()
    finally:
        databases.drop(target)
