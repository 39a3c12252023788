"""Small leaks and lies (issue 25, item 7): passwords never printed nor put on a command
line, verify never calls an unread chain intact, names from events cannot drive the
terminal, database errors are one line, and every command reads DLC_TOPIC."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from dlc_ledger.cli.app import main
from dlc_ledger.wiring import context
from ledger.envelopes import make_envelope
from ledger.events import JobSubmitted, ReplicaSpec
from ledger.ids import fact_event_id
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, started
from tests.support.clis import CliCall, cli_process
from tests.support.factories import occupancy_started

SECRET = "s3cret-pw"


_cli = cli_process


# --- passwords ----------------------------------------------------------------------------


def test_a_database_url_that_fails_to_parse_is_echoed_without_its_password() -> None:
    done = _cli(f"postgresql://app:{SECRET}@db.example:notaport/ledger", "db", "url")
    assert done.returncode == 1
    assert SECRET not in done.stderr + done.stdout
    assert "app:***@db.example" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_db_url_masks_the_password_unless_asked(database_url: str) -> None:
    # trust authentication ignores the password: the URL works, and carries one
    with_password = database_url.replace("root@", f"root:{SECRET}@")
    assert with_password != database_url
    masked = _cli(with_password, "db", "url")
    assert masked.returncode == 0, masked.stderr
    assert SECRET not in masked.stdout and "root:***@" in masked.stdout
    shown = _cli(with_password, "db", "url", "--show-password")
    assert f"root:{SECRET}@" in shown.stdout


def test_ingest_refuses_a_password_on_its_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://app:{SECRET}@127.0.0.1:1/ledger"
    code = main(["ingest", "--database-url", url, "--bootstrap", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "process list" in err and "--database-url-file" in err, err
    assert SECRET not in err


def test_ingest_reads_its_url_from_a_file_and_honours_dlc_topic(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dlc_ledger.cli.ingest as ingest

    seen: dict[str, Any] = {}

    def fake_run_ingest(store: PostgresEventStore, bootstrap: str, topic: str, *a: Any,
                        **k: Any) -> Any:  # fmt: skip
        seen.update(url=store.engine.url.render_as_string(hide_password=False), topic=topic)
        return SimpleNamespace(
            messages=0, appended=0, duplicates=0, dead_letters=0, batches=0,
            store_failures=0, busy_seconds=0.0,
        )  # fmt: skip

    monkeypatch.setattr(ingest, "run_ingest", fake_run_ingest)
    monkeypatch.setenv("DLC_TOPIC", "team.cluster-events")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    context.settings.cache_clear()
    url_file = tmp_path / "url"
    url_file.write_text(database_url.replace("root@", f"root:{SECRET}@") + "\n")
    try:
        code = main(["ingest", "--database-url-file", str(url_file), "--bootstrap", "x:1"])
    finally:
        context.settings.cache_clear()
    assert code == 0
    assert seen["topic"] == "team.cluster-events"
    assert f"root:{SECRET}@" in seen["url"]


def test_broker_start_honours_dlc_topic_and_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dlc_ledger.cli.broker as broker_cli

    made: dict[str, Any] = {}

    class FakeBroker:
        def __init__(self, path: Path, *, port: int, topic: str, partitions: int) -> None:
            made.update(topic=topic, partitions=partitions)

        def start(self) -> Any:
            return SimpleNamespace(as_dict=lambda: {"running": True})

    monkeypatch.setattr(broker_cli, "EmbeddedBroker", FakeBroker)
    monkeypatch.setenv("DLC_TOPIC", "team.cluster-events")
    monkeypatch.setenv("DLC_PARTITIONS", "7")
    context.settings.cache_clear()
    try:
        assert main(["broker", "start", "--data-dir", str(tmp_path)]) == 0
    finally:
        context.settings.cache_clear()
    assert made == {"topic": "team.cluster-events", "partitions": 7}


# --- verify ---------------------------------------------------------------------------------


def test_verify_never_reports_an_unread_chain_intact(
    store: PostgresEventStore, database_url: str
) -> None:
    store.append([occupancy_started(n) for n in range(5)])
    plain = database_url.replace("+psycopg", "")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        conn.execute("UPDATE events SET source = 'forged' WHERE position = 3")
        conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
    for batch in ("0", "-1"):
        done = _cli(database_url, "verify", "--batch", batch)
        assert done.returncode != 0, done.stdout
        assert "intact" not in done.stdout
    with pytest.raises(ValueError, match="batch must be at least 1"):
        store.verify(batch=0)
    one = _cli(database_url, "verify", "--batch", "1")
    assert one.returncode == 1 and "position 3" in one.stderr


# --- control characters ---------------------------------------------------------------------

HOSTILE_WS = "ws\nx\x1b[2J\x1b]0;pwned\x07"
HOSTILE_USER = "eve\r\u202egnp.exe"


def test_names_from_events_cannot_split_rows_or_drive_the_terminal(
    store: PostgresEventStore, cli: CliCall
) -> None:
    job = "job-hostile"
    store.append(
        [
            make_envelope(
                JobSubmitted(
                    job_uid=job, name=job, workspace=HOSTILE_WS, user=HOSTILE_USER,
                    replicas=(ReplicaSpec(count=1, mgpu=1000, cpu_milli=0, memory_mib=0),),
                ),
                event_id=fact_event_id("test", "Job", job, "submitted"),
                stream=f"job/{job}", occurred_at=at("2026-11-01T00:00"),
                observed_at=at("2026-11-01T00:00"), source="kube-watcher/test",
            ),
            started("h", at("2026-11-01T00:00"), job=job, workspace=HOSTILE_WS,
                    user=HOSTILE_USER),
        ]
    )  # fmt: skip
    cli("project")
    outputs = [
        cli("jobs", "list"),
        cli("jobs", "show", job),
        cli("report", "occupancy", "--at", "2026-11-02", "--group-by", "workspace,user"),
    ]
    for out in outputs:
        for char in "\x1b\x07\r\u202e":
            assert char not in out, (char, out)
    table = outputs[0].splitlines()
    assert len(table) == 3, table  # header, rule, one row: the newline did not split it
    assert "ws\\nx\\x1b[2J" in table[2] and "eve\\r\\u202egnp.exe" in table[2]
    assert "workspace       ws\\nx\\x1b[2J" in outputs[1] or "ws\\nx\\x1b[2J" in outputs[1]
    # machine formats keep the exact values
    (listed,) = json.loads(cli("jobs", "list", "--format", "json"))
    assert listed["workspace"] == HOSTILE_WS and listed["user"] == HOSTILE_USER
    text = cli("report", "occupancy", "--at", "2026-11-02", "--format", "csv")
    (row,) = csv.DictReader(io.StringIO(text))
    assert row["workspace"] == HOSTILE_WS


# --- database errors ------------------------------------------------------------------------


def test_a_value_the_database_refuses_is_one_line_without_sql(
    store: PostgresEventStore, cli: CliCall, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["jobs", "list", "--workspace", "a\x00b"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "SELECT" not in err and "[parameters" not in err and "NUL" in err, err
    assert main(["report", "usage", "--to", "9999-12-31T23:59:59-01:00"]) == 1
    err = capsys.readouterr().err
    assert "--to" in err and "out of range" in err and len(err.strip().splitlines()) == 1
