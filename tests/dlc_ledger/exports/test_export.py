"""What ``export`` writes: every column of every event in position order, parts of a bounded
size chained by their anchors, one consistent snapshot, the same bytes for the same store."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import orjson
import pytest

from dlc_ledger.services.store import (
    MANIFEST,
    ExportTargetNotEmpty,
    Manifest,
    export_store,
    import_store,
)
from ledger.store.chain import GENESIS_HASH
from ledger.store.exports import COLUMNS
from ledger.store.postgres import PostgresEventStore
from tests.support.exports import PER_FILE, Seeded
from tests.support.factories import occupancy_started


def test_parts_hold_every_column_in_position_order_chained_by_their_anchors(
    seeded: Seeded, exported: Path
) -> None:
    manifest = json.loads((exported / MANIFEST).read_text())
    head = seeded.store.head_position()
    assert manifest["events"] == head and manifest["head"]["position"] == head
    assert manifest["format"] == "dlc-ledger-events" and manifest["per_file"] == PER_FILE
    files = manifest["files"]
    assert len(files) == -(-head // PER_FILE)
    assert [f["events"] for f in files[:-1]] == [PER_FILE] * (len(files) - 1)
    assert files[0]["start"] == {"position": 0, "hash": GENESIS_HASH.hex()}
    for before, after in itertools.pairwise(files):
        assert after["start"] == before["end"]
    assert files[-1]["end"] == manifest["head"]
    positions = []
    for entry in files:
        with gzip.open(exported / entry["name"]) as part:
            lines = [orjson.loads(line) for line in part]
        assert all(set(line) == set(COLUMNS) for line in lines)
        assert lines[-1]["hash"] == entry["end"]["hash"]
        positions += [line["position"] for line in lines]
    assert positions == list(range(1, head + 1))
    with seeded.store.engine.connect() as conn:
        event_id, digest, recorded_at = conn.exec_driver_sql(
            "SELECT event_id::text, hash, recorded_at FROM events WHERE position = 1"
        ).one()
    with gzip.open(exported / files[0]["name"]) as part:
        first = orjson.loads(part.readline())
    assert (first["event_id"], first["hash"]) == (event_id, digest.hex())
    assert first["recorded_at"] == recorded_at.isoformat().replace("+00:00", "Z")


def test_the_same_store_exports_to_the_same_bytes(
    seeded: Seeded, exported: Path, tmp_path: Path
) -> None:
    again = export_store(seeded.store, tmp_path / "again", per_file=PER_FILE)
    first = Manifest.parse((exported / MANIFEST).read_bytes())
    assert [p.sha256 for p in again.parts] == [p.sha256 for p in first.parts]


def test_an_export_is_one_snapshot_whatever_is_appended_meanwhile(
    store: PostgresEventStore, tmp_path: Path
) -> None:
    store.append([occupancy_started(n) for n in range(1, 8)])
    appended: list[int | None] = []

    def append_meanwhile(_part: object) -> None:  # after the first part is written
        if not appended:
            appended.append(store.append([occupancy_started(100)]).last_position)

    manifest = export_store(store, tmp_path / "x", per_file=3, on_part=append_meanwhile)
    assert appended == [8] and store.head_position() == 8
    assert manifest.head.position == manifest.events == 7
    assert [(p.first_position, p.last_position) for p in manifest.parts] == [(1, 3), (4, 6), (7, 7)]


def test_an_empty_store_exports_and_imports_as_empty(
    store: PostgresEventStore, database_url: str, tmp_path: Path
) -> None:
    manifest = export_store(store, tmp_path / "x")
    assert (manifest.events, manifest.parts, manifest.head.position) == (0, (), 0)
    restored = import_store(store, tmp_path / "x")
    assert (restored.events, restored.parts, store.head_position()) == (0, 0, 0)


def test_an_export_never_writes_into_a_directory_that_holds_files(
    store: PostgresEventStore, tmp_path: Path
) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep.txt").write_text("mine")
    with pytest.raises(ExportTargetNotEmpty, match="not empty"):
        export_store(store, tmp_path / "old")
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["keep.txt"]
