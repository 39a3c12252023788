"""``dlc-ledger export``: the event store into files that ``dlc-ledger import`` restores.

Every event, every column, in position order, from one snapshot of the store (a
REPEATABLE READ transaction: appends that commit during the export are not in it, and the
head it records is the last event it wrote). Rows stream through a server-side cursor into
gzip parts of at most ``per_file`` events, so memory holds one batch whatever the store's
size. The manifest is written last (and renamed into place): a directory without one is an
export that did not finish. The format: :mod:`.export_format`; the
restore: :mod:`.restores`; why and when: ``docs/operations.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from dlc_ledger.services.store.export_format import (
    GENESIS,
    MANIFEST,
    Anchor,
    Manifest,
    Part,
    encode_line,
    part_name,
)
from ledger.errors import Conflict, Invalid
from ledger.store.base import EventStore
from ledger.store.exports import StoredRow, head_row, stored_rows

__all__ = ["DEFAULT_PER_FILE", "ExportTargetNotEmpty", "export_store"]

DEFAULT_PER_FILE = 100_000
#: gzip's own default: level 9 costs twice the time for a few per cent
_LEVEL = 6


class ExportTargetNotEmpty(Conflict):
    """The export's directory already holds files: an export never mixes with others."""


def export_store(
    store: EventStore,
    to: Path,
    *,
    per_file: int = DEFAULT_PER_FILE,
    on_part: Callable[[Part], None] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Manifest:
    """Write every event of ``store`` under ``to`` (created; it must be empty) and return
    the manifest written there; ``on_part`` hears of each part once it is complete."""
    if per_file < 1:
        raise Invalid(f"--per-file is at least 1, got {per_file}")
    _empty_directory(to)
    exported_at = now()
    parts: list[Part] = []
    with store.snapshot() as uow:
        conn = uow.connection
        head = head_row(conn)
        part: _PartWriter | None = None
        for batch in stored_rows(conn):
            start = 0
            while start < len(batch):
                if part is None:
                    previous = parts[-1].end if parts else GENESIS
                    part = _PartWriter(to / part_name(len(parts) + 1), previous)
                room = per_file - part.events
                part.write(batch[start : start + room])
                start += room
                if part.events == per_file:
                    parts.append(part.close())
                    if on_part is not None:
                        on_part(parts[-1])
                    part = None
        if part is not None:
            parts.append(part.close())
            if on_part is not None:
                on_part(parts[-1])
    end = parts[-1].end if parts else GENESIS
    if head is not None and Anchor(*head) != end:  # one snapshot: cannot differ
        raise AssertionError(f"the snapshot's head {head[0]} is not the last event written")
    manifest = Manifest(exported_at=exported_at, per_file=per_file, head=end, parts=tuple(parts))
    _write_durably(to / MANIFEST, manifest.to_json())
    _sync_directory(to)
    return manifest


def _empty_directory(to: Path) -> None:
    if to.exists() and not to.is_dir():
        raise Invalid(f"{to} is not a directory")
    if to.is_dir() and any(to.iterdir()):
        raise ExportTargetNotEmpty(f"{to} is not empty: export into a new or empty directory")
    to.mkdir(parents=True, exist_ok=True)


@dataclass
class _PartWriter:
    """One part being written: gzip over the file, its rows counted, its last anchor kept."""

    path: Path
    start: Anchor
    events: int = 0
    first_position: int = 0
    end: Anchor = field(init=False)
    _file: BinaryIO = field(init=False)
    _gzip: gzip.GzipFile = field(init=False)

    def __post_init__(self) -> None:
        self.end = self.start
        self._file = self.path.open("xb")
        # no name and no time in the header: the same store exports to the same bytes
        self._gzip = gzip.GzipFile(
            filename="", mode="wb", fileobj=self._file, compresslevel=_LEVEL, mtime=0
        )

    def write(self, rows: list[StoredRow]) -> None:
        if not rows:
            return
        if not self.events:
            self.first_position = rows[0].position
        self._gzip.write(b"".join(encode_line(row) for row in rows))
        self.events += len(rows)
        self.end = Anchor(rows[-1].position, rows[-1].hash)

    def close(self) -> Part:
        self._gzip.close()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        with self.path.open("rb") as written:
            digest = hashlib.file_digest(written, "sha256").hexdigest()
        return Part(
            name=self.path.name,
            first_position=self.first_position,
            last_position=self.end.position,
            events=self.events,
            start=self.start,
            end=self.end,
            sha256=digest,
        )


def _write_durably(path: Path, content: bytes) -> None:
    """``content`` at ``path``, whole or not at all: written beside it, synced, renamed."""
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(path)


def _sync_directory(directory: Path) -> None:
    """The parts' and the manifest's names on disk too, not only their contents."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
