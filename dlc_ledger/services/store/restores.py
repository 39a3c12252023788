"""``dlc-ledger import``: an export (:mod:`.exports`) back into an empty
store, every event exactly as it was stored, or nothing at all.

Before anything is loaded, the manifest is read and every part's sha256 checked. Then the
parts stream, line by line, into one binary COPY inside one transaction that holds the
append lock: each line's position must follow the one before (no gap, no repeat) and its hash
must be the one ``verify`` computes from the previous hash and the line's record
(:func:`~.export_format.chain_link`). The first line that fails ends the
COPY; the transaction rolls back and :class:`~.export_format.RestoreRefused`
names the file, the line, the first bad position and why. A part that ends short, whose last
hash is not its manifest's anchor, or whose bytes changed after the check is refused too.
The restored store then rebuilds its read models (``dlc-ledger project``): ``docs/operations.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from dlc_ledger.services.store.export_format import (
    GENESIS,
    MANIFEST,
    Anchor,
    Manifest,
    Part,
    RestoreRefused,
    chain_link,
    decode_line,
)
from ledger.errors import Conflict, Invalid
from ledger.store.base import EventStore
from ledger.store.exports import StoredRow, copy_rows, finish_load, head_row

__all__ = [
    "Restored",
    "StoreNotEmpty",
    "check_parts",
    "import_store",
    "open_export",
    "read_manifest",
]

_CHUNK = 1 << 20


class StoreNotEmpty(Conflict):
    """The store already holds events: a restore never merges into a store."""


@dataclass(frozen=True, slots=True)
class Restored:
    events: int
    parts: int
    head: Anchor


def read_manifest(directory: Path) -> Manifest:
    """The manifest of the export in ``directory`` (:class:`RestoreRefused` if there is
    none or it does not hold together)."""
    if not directory.is_dir():
        raise Invalid(f"{directory} is not a directory")
    path = directory / MANIFEST
    if not path.is_file():
        raise RestoreRefused(
            "bad manifest",
            f"{directory} has no {MANIFEST}: not an export, or one that did not finish",
        )
    return Manifest.parse(path.read_bytes())


def check_parts(directory: Path, manifest: Manifest) -> None:
    """Every part is there with the sha256 the manifest gives it."""
    for part in manifest.parts:
        path = directory / part.name
        if not path.is_file():
            raise RestoreRefused("manifest mismatch", "the file is missing", file=part.name)
        with path.open("rb") as raw:
            digest = hashlib.file_digest(raw, "sha256").hexdigest()
        if digest != part.sha256:
            raise RestoreRefused(
                "manifest mismatch",
                f"sha256 {digest}, the manifest says {part.sha256} (damaged or changed)",
                file=part.name,
                position=part.first_position,
            )


def open_export(directory: Path) -> Manifest:
    """The manifest of the export in ``directory``, every part found with its sha256: what
    is checked before a database is touched."""
    manifest = read_manifest(directory)
    check_parts(directory, manifest)
    return manifest


def import_store(
    store: EventStore,
    directory: Path,
    *,
    manifest: Manifest | None = None,
    on_part: Callable[[Part], None] | None = None,
) -> Restored:
    """Load the export in ``directory`` into ``store``, which must hold no event; refused
    whole (:class:`RestoreRefused`, :class:`StoreNotEmpty`) or done whole. ``manifest``: as
    :func:`open_export` returned it (else it is opened here). ``on_part`` hears of each part
    once its lines are checked and written (all committed at the end)."""
    if manifest is None:
        manifest = open_export(directory)
    with store.transaction() as uow:
        uow.lock_appends()  # no append may slip in between the check and the load
        head = uow.head_position()
        if head:
            raise StoreNotEmpty(
                f"the store already holds events (head position {head}): import restores "
                "into an empty database only (a new one: dlc-ledger import creates its schema)"
            )
        conn = uow.connection
        loaded = copy_rows(conn, _checked_rows(directory, manifest, on_part))
        stored = head_row(conn)
        if (Anchor(*stored) if stored else GENESIS) != manifest.head:  # the parts end there
            raise RestoreRefused(
                "manifest mismatch",
                f"the loaded events end at position {stored[0] if stored else 0}, the "
                f"manifest's head is {manifest.head.position}",
            )
        finish_load(conn)
    return Restored(loaded, len(manifest.parts), manifest.head)


def _checked_rows(
    directory: Path, manifest: Manifest, on_part: Callable[[Part], None] | None
) -> Iterator[StoredRow]:
    for part in manifest.parts:
        yield from _part_rows(directory / part.name, part)
        if on_part is not None:
            on_part(part)


def _part_rows(path: Path, part: Part) -> Iterator[StoredRow]:
    """The rows of one part, each checked against the chain before it is yielded."""
    expected, link, number = part.start.position + 1, part.start.hash, 0

    def refused(reason: str, detail: str, position: int | None = None) -> RestoreRefused:
        at = expected if position is None else position
        return RestoreRefused(reason, detail, file=part.name, line=number, position=at)

    with path.open("rb") as raw:
        hashing = _HashingReader(raw)
        try:
            with gzip.GzipFile(filename="", mode="rb", fileobj=hashing) as lines:
                for number, line in enumerate(lines, 1):  # noqa: B007 (refused() reads it)
                    try:
                        row = decode_line(line)
                    except orjson.JSONDecodeError as exc:
                        raise refused("bad JSON", str(exc)) from None
                    except (ValueError, TypeError) as exc:
                        raise refused("bad record", str(exc)) from None
                    if row.position != expected:
                        if row.position > expected:
                            raise refused(
                                "position gap",
                                f"position {expected} is missing: the line holds {row.position}",
                            )
                        raise refused(
                            "position out of order",
                            f"the line holds position {row.position} after {expected - 1}",
                        )
                    if row.position > part.last_position:
                        raise refused(
                            "manifest mismatch",
                            f"the file's manifest entry ends at position {part.last_position}",
                        )
                    link = chain_link(link, row)
                    if link != row.hash:
                        raise refused(
                            "hash mismatch",
                            f"event {row.event_id} is not the event the chain recorded there "
                            f"(its hash is {row.hash.hex()[:12]}…, its record hashes to "
                            f"{link.hex()[:12]}…)",
                        )
                    yield row
                    expected += 1
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            number += 1
            raise refused("damaged file", f"gzip: {exc}") from None
        hashing.drain()
    number += 1  # where the missing lines would be
    if expected <= part.last_position:
        raise refused(
            "position gap",
            f"the file ends at position {expected - 1}, its manifest entry at {part.last_position}",
        )
    if link != part.end.hash:
        number -= 1  # the last line's hash is not the anchor's
        raise refused(
            "manifest mismatch",
            f"the chain ends at {link.hex()[:12]}…, the manifest's end anchor says "
            f"{part.end.hash.hex()[:12]}…",
            part.last_position,
        )
    if hashing.hexdigest() != part.sha256:
        raise refused("manifest mismatch", "the file changed after its sha256 was checked")


class _HashingReader:
    """A binary file that hashes what is read from it: the bytes the load decompressed are
    the bytes whose sha256 was checked, not a file swapped in between."""

    mode = "rb"

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self._raw.read(size)
        self._sha.update(chunk)
        return chunk

    def drain(self) -> None:
        """Hash what the decompressor left unread (nothing, in an intact part)."""
        while self.read(_CHUNK):
            pass

    def hexdigest(self) -> str:
        return self._sha.hexdigest()

    def __getattr__(self, name: str) -> Any:  # what else gzip asks of a file (closed, ...)
        return getattr(self._raw, name)
