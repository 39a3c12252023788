"""``dlc-ledger verify --metrics-file`` writes the chain's state for the textfile
collector: 1 when intact, 0 once a row was tampered with (the alert's input)."""

from __future__ import annotations

from pathlib import Path

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from ledger.store.postgres import PostgresEventStore
from tests.support.clis import cli_process
from tests.support.factories import occupancy_started


def _gauges(path: Path) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(path.read_text())
        for sample in family.samples
    }


def test_verify_writes_ok_then_broken(
    store: PostgresEventStore, database_url: str, tmp_path: Path
) -> None:
    store.append([occupancy_started(n) for n in range(6)])
    out = tmp_path / "dlc_verify.prom"
    done = cli_process(database_url, "verify", "--metrics-file", str(out))
    assert done.returncode == 0, done.stderr
    intact = _gauges(out)
    assert intact["dlc_chain_verification_ok"] == 1
    assert intact["dlc_chain_verified_events"] == 6
    assert intact["dlc_chain_verification_timestamp_seconds"] > 0

    with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        conn.execute("UPDATE events SET source = 'forged' WHERE position = 4")
        conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
    broken = cli_process(database_url, "verify", "--metrics-file", str(out))
    assert broken.returncode == 1
    assert _gauges(out)["dlc_chain_verification_ok"] == 0
