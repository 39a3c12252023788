"""The store's commands as a user runs them: real process, real database, exit codes."""

from __future__ import annotations

import psycopg

from ledger.store.postgres import PostgresEventStore
from tests.support.clis import cli_process
from tests.support.databases import TemplateDatabases
from tests.support.factories import occupancy_started

_cli = cli_process


def test_upgrade_then_manual_update_fails_and_verify_reports(databases: TemplateDatabases) -> None:
    url = databases.empty()
    try:
        done = _cli(url, "db", "upgrade")
        assert done.returncode == 0, done.stderr
        store = PostgresEventStore(url)
        store.append([occupancy_started(n) for n in range(12)])
        store.close()
        plain = url.replace("+psycopg", "")
        with psycopg.connect(plain, autocommit=True) as conn:
            try:
                conn.execute("UPDATE events SET type = 'x'")
                raise AssertionError("UPDATE on events was accepted")
            except psycopg.Error as exc:
                assert "append-only" in str(exc)

        ok = _cli(url, "verify")
        assert ok.returncode == 0, ok.stderr
        assert "12 events verified" in ok.stdout

        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
            conn.execute("UPDATE events SET source = 'forged' WHERE position = 7")
            conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
        broken = _cli(url, "verify")
        assert broken.returncode == 1
        assert "position 7" in broken.stderr
        assert "Traceback" not in broken.stderr
    finally:
        databases.drop(url)


def test_unreachable_database_is_one_clear_line() -> None:
    done = _cli("postgresql://nobody@127.0.0.1:1/none", "verify")
    assert done.returncode == 69  # unavailable: try again
    assert done.stderr.startswith("dlc-ledger: error: database unreachable")
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_database_url_is_one_clear_line() -> None:
    done = _cli("mysql://x@y/z", "db", "url")
    assert done.returncode == 1
    assert "must be a PostgreSQL URL" in done.stderr


def test_dead_letters_list_show_retry(databases: TemplateDatabases) -> None:
    url = databases.clone()
    try:
        store = PostgresEventStore(url)
        good = occupancy_started(1)
        with store.transaction() as uow:
            uow.record_dead_letter(
                source="kafka", reason="unknown-type", error="unknown", payload=good.to_json()
            )
            bad_id = uow.record_dead_letter(
                source="kafka", reason="invalid-schema", error="not JSON", payload=b"{nope"
            )
        listed = _cli(url, "dead-letters", "list")
        assert listed.returncode == 0 and "unknown-type" in listed.stdout
        shown = _cli(url, "dead-letters", "show", str(bad_id))
        assert '"payload": "{nope"' in shown.stdout
        still_bad = _cli(url, "dead-letters", "retry", str(bad_id))
        assert still_bad.returncode == 1 and "still invalid" in still_bad.stderr
        retried = _cli(url, "dead-letters", "retry", "1")
        assert retried.returncode == 0, retried.stderr
        assert store.head_position() == 1
        assert [d.id for d in store.dead_letters()] == [bad_id]
        missing = _cli(url, "dead-letters", "show", "999")
        assert missing.returncode != 0 and "no dead letter with id 999" in missing.stderr
        store.close()
    finally:
        databases.drop(url)
