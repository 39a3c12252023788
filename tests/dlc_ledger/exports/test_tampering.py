"""A damaged or tampered export is refused whole, naming the file, the line, the first bad
position and why; the target store stays empty (nothing half-imported)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from dlc_ledger.cli.app import main
from dlc_ledger.services.store import (
    MANIFEST,
    RestoreRefused,
    chain_link,
    decode_line,
    encode_line,
    import_store,
)
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall
from tests.support.exports import PER_FILE

Lines = list[bytes]


def _copy(exported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(exported, target)
    return target


def _manifest(directory: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((directory / MANIFEST).read_text())
    return loaded


def _rewrite(
    directory: Path, name: str, change: Callable[[Lines], Lines], *, fix_sha: bool = True
) -> None:
    """Rewrite part ``name``'s lines with ``change``; with ``fix_sha`` its manifest entry's
    sha256 too, so that only the chain can tell."""
    path = directory / name
    with gzip.open(path, "rb") as part:
        lines = part.read().splitlines(keepends=True)
    with gzip.open(path, "wb") as part:
        part.write(b"".join(change(lines)))
    if fix_sha:
        manifest = _manifest(directory)
        for entry in manifest["files"]:  # type: ignore[attr-defined]
            if entry["name"] == name:
                entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=2))


def _refused(store: PostgresEventStore, directory: Path) -> tuple[RestoreRefused, list[str]]:
    loaded: list[str] = []
    with pytest.raises(RestoreRefused) as refused:
        import_store(store, directory, on_part=lambda part: loaded.append(part.name))
    assert store.head_position() == 0  # rolled back: not one event kept
    return refused.value, loaded


SECOND = "events-000002.jsonl.gz"
LINE = 17  # in the second part
POSITION = PER_FILE + LINE


def test_one_changed_byte_in_an_events_data_is_named_by_its_position(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)

    def change_a_byte(lines: Lines) -> Lines:
        line = lines[LINE - 1]
        at = line.index(b'"data":{') + len(b'"data":{"')  # the first key's first letter
        changed = bytes([line[at] ^ 0x01])
        assert changed.isalpha()  # still valid JSON: only the chain can tell
        lines[LINE - 1] = line[:at] + changed + line[at + 1 :]
        return lines

    _rewrite(directory, SECOND, change_a_byte)
    refusal, loaded = _refused(store, directory)
    assert (refusal.reason, refusal.file, refusal.line) == ("hash mismatch", SECOND, LINE)
    assert refusal.position == POSITION
    assert loaded == ["events-000001.jsonl.gz"]  # the first part went in, and was rolled back
    assert f"{SECOND} line {LINE} (position {POSITION}): hash mismatch" in str(refusal)


def test_a_deleted_line_is_a_gap_named_by_the_missing_position(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    _rewrite(directory, SECOND, lambda lines: lines[: LINE - 1] + lines[LINE:])
    refusal, _ = _refused(store, directory)
    assert (refusal.reason, refusal.file, refusal.line) == ("position gap", SECOND, LINE)
    assert refusal.position == POSITION
    assert f"position {POSITION} is missing: the line holds {POSITION + 1}" in str(refusal)


def test_a_part_cut_short_is_a_gap_at_its_end(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    _rewrite(directory, SECOND, lambda lines: lines[:-1])
    refusal, _ = _refused(store, directory)
    assert (refusal.reason, refusal.file, refusal.line) == ("position gap", SECOND, PER_FILE)
    assert refusal.position == 2 * PER_FILE


def test_a_repeated_line_is_out_of_order(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    _rewrite(directory, SECOND, lambda lines: [*lines[:LINE], lines[LINE - 1], *lines[LINE:]])
    refusal, _ = _refused(store, directory)
    assert (refusal.reason, refusal.line, refusal.position) == (
        "position out of order",
        LINE + 1,
        POSITION + 1,
    )


def test_a_line_that_is_no_json_is_named(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)

    def cut(lines: Lines) -> Lines:
        lines[LINE - 1] = lines[LINE - 1][:40] + b"\n"
        return lines

    _rewrite(directory, SECOND, cut)
    refusal, _ = _refused(store, directory)
    assert (refusal.reason, refusal.file, refusal.line) == ("bad JSON", SECOND, LINE)
    assert refusal.position == POSITION


def test_a_wrong_sha256_is_refused_before_anything_is_loaded(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    manifest = _manifest(directory)
    files = manifest["files"]
    assert isinstance(files, list) and len(files) > 2
    files[-1]["sha256"] = "0" * 64  # the last part: a check while loading would come late
    (directory / MANIFEST).write_text(json.dumps(manifest))
    refusal, loaded = _refused(store, directory)
    assert (refusal.reason, refusal.file) == ("manifest mismatch", files[-1]["name"])
    assert loaded == []  # no part was read into the store


def test_a_changed_part_with_its_old_sha256_is_refused_before_loading(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    _rewrite(directory, SECOND, lambda lines: lines[:-1], fix_sha=False)
    refusal, loaded = _refused(store, directory)
    assert (refusal.reason, refusal.file, loaded) == ("manifest mismatch", SECOND, [])


def test_a_chain_rewritten_to_the_end_of_its_part_still_breaks_at_the_anchor(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    # whoever edits an event and recomputes every hash after it in the part (so each line
    # agrees with the one before) leaves the part's end anchor in the manifest behind
    directory = _copy(exported, tmp_path)
    entry = _manifest(directory)["files"][1]  # type: ignore[index]

    def forge(lines: Lines) -> Lines:
        previous = bytes.fromhex(entry["start"]["hash"])
        forged = []
        for number, line in enumerate(lines, 1):
            fields = orjson.loads(line)
            if number == LINE:
                fields["source"] = "someone-else"
            fields["hash"] = chain_link(previous, decode_line(orjson.dumps(fields))).hex()
            row = decode_line(orjson.dumps(fields))
            previous = row.hash
            forged.append(encode_line(row))
        return forged

    _rewrite(directory, SECOND, forge)
    refusal, _ = _refused(store, directory)
    assert (refusal.reason, refusal.file) == ("manifest mismatch", SECOND)
    assert (refusal.line, refusal.position) == (PER_FILE, 2 * PER_FILE)  # its last line
    assert "the manifest's end anchor says" in str(refusal)


def test_a_manifest_whose_parts_do_not_follow_each_other_is_refused(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    manifest = _manifest(directory)
    files = manifest["files"]
    assert isinstance(files, list)
    del files[1]  # a part left out: the third no longer starts where the first ends
    manifest["events"] = sum(f["events"] for f in files)
    (directory / MANIFEST).write_text(json.dumps(manifest))
    refusal, loaded = _refused(store, directory)
    assert (refusal.reason, refusal.file, loaded) == ("manifest mismatch", MANIFEST, [])
    assert refusal.position == PER_FILE + 1


def test_a_directory_without_a_manifest_is_no_export(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    (directory / MANIFEST).unlink()
    refusal, _ = _refused(store, directory)
    assert refusal.reason == "bad manifest" and "did not finish" in str(refusal)


def test_the_cli_refuses_in_one_line_with_exit_1(
    exported: Path,
    tmp_path: Path,
    store: PostgresEventStore,
    cli: CliCall,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = _copy(exported, tmp_path)
    _rewrite(directory, SECOND, lambda lines: lines[: LINE - 1] + lines[LINE:])
    capsys.readouterr()
    assert main(["import", str(directory)]) == 1
    *progress, said = capsys.readouterr().err.splitlines()
    assert progress == ["events-000001.jsonl.gz: checked positions 1-250 (250 events)"]
    assert said.startswith("dlc-ledger: error: import refused, nothing imported: ")
    assert f"{SECOND} line {LINE} (position {POSITION}): position gap" in said
    assert store.head_position() == 0


def test_parts_are_read_from_the_exports_directory_only(
    exported: Path, tmp_path: Path, store: PostgresEventStore
) -> None:
    directory = _copy(exported, tmp_path)
    manifest = _manifest(directory)
    files = manifest["files"]
    assert isinstance(files, list)
    files[0]["name"] = "../../etc/passwd"
    (directory / MANIFEST).write_text(json.dumps(manifest))
    refusal, _ = _refused(store, directory)
    assert refusal.reason == "bad manifest" and "not an export part's" in str(refusal)
