"""The export's files: one event per JSON line, gzip-compressed parts, and a manifest.

Shared by the export (:mod:`.exports`) and the restore
(:mod:`.restores`) so that both read and write one format, and the
restore's refusals (:class:`RestoreRefused`) name a file, a line and a position.

A line holds every column of the event's row (``ledger/store/exports.py``): ids as strings,
timestamps in UTC (``Z``, microseconds when non-zero, as the chain hashes them), ``data`` as
JSON and ``hash`` in hex. The manifest lists the parts in position order, each with its chain
anchors (the position and hash before its first event and at its last) and its sha256, and
the store's head at the export: the chain links every part to the one before, the sha256
finds a damaged part before anything is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from ledger.canonical import canonical_json, format_timestamp, parse_timestamp
from ledger.errors import Invalid
from ledger.store.base import RecordedEvent
from ledger.store.chain import GENESIS_HASH, record_hash
from ledger.store.exports import COLUMNS, StoredRow

__all__ = [
    "COMPRESSION",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "Anchor",
    "Manifest",
    "Part",
    "RestoreRefused",
    "chain_link",
    "decode_line",
    "encode_line",
    "part_name",
]

FORMAT = "dlc-ledger-events"
FORMAT_VERSION = 1
COMPRESSION = "gzip"
MANIFEST = "manifest.json"
_PART_NAME = re.compile(r"^events-[0-9]{6,}\.jsonl\.gz$")
_HEX_HASH = re.compile(r"^[0-9a-f]{64}$")
_UUIDS = ("event_id", "causation_id", "correlation_id")
_TIMES = ("occurred_at", "observed_at", "recorded_at")
_INTS = ("position", "version", "schema_version")
_TEXTS = ("stream", "type", "source")


class RestoreRefused(Invalid):
    """An export that is not restored, and where it first went wrong: the file, the line
    and the first bad position when known, and why (``reason``: ``bad manifest``,
    ``manifest mismatch``, ``bad JSON``, ``bad record``, ``position gap``, ``hash mismatch``)."""

    def __init__(
        self,
        reason: str,
        detail: str,
        *,
        file: str | None = None,
        line: int | None = None,
        position: int | None = None,
    ) -> None:
        where = " ".join(
            part
            for part in (
                file or "",
                f"line {line}" if line is not None else "",
                f"(position {position})" if position is not None else "",
            )
            if part
        )
        super().__init__(
            f"import refused, nothing imported: {where + ': ' if where else ''}{reason}: {detail}"
        )
        self.reason, self.detail = reason, detail
        self.file, self.line, self.position = file, line, position


@dataclass(frozen=True, slots=True)
class Anchor:
    """A point of the hash chain: a position and the hash stored there (position 0: the
    genesis hash, before the first event)."""

    position: int
    hash: bytes

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "hash": self.hash.hex()}


GENESIS = Anchor(0, GENESIS_HASH)


@dataclass(frozen=True, slots=True)
class Part:
    """One file of the export: its events' positions, its chain anchors, its digest."""

    name: str
    first_position: int
    last_position: int
    events: int
    start: Anchor  # the chain just before the part's first event
    end: Anchor  # at its last event
    sha256: str  # of the file as written (compressed), hex

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "first_position": self.first_position,
            "last_position": self.last_position,
            "events": self.events,
            "start": self.start.to_json(),
            "end": self.end.to_json(),
            "sha256": self.sha256,
        }


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an export holds: its parts in position order and the store's head then."""

    exported_at: datetime
    per_file: int
    head: Anchor
    parts: tuple[Part, ...]

    @property
    def events(self) -> int:
        return sum(part.events for part in self.parts)

    def to_json(self) -> bytes:
        document = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "compression": COMPRESSION,
            "exported_at": format_timestamp(self.exported_at),
            "per_file": self.per_file,
            "events": self.events,
            "head": self.head.to_json(),
            "files": [part.to_json() for part in self.parts],
        }
        return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def parse(cls, raw: bytes) -> Manifest:
        """The manifest in ``raw``, its parts checked to follow one another along the chain
        (:class:`RestoreRefused` naming what is wrong)."""
        try:
            document = orjson.loads(raw)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            if document.get("format") != FORMAT:
                raise ValueError(f"format is {document.get('format')!r}, not {FORMAT!r}")
            if document.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"format_version {document.get('format_version')!r}: this version "
                    f"reads {FORMAT_VERSION}"
                )
            if document.get("compression") != COMPRESSION:
                raise ValueError(f"compression {document.get('compression')!r}: not {COMPRESSION}")
            manifest = cls(
                exported_at=parse_timestamp(_typed(document, "exported_at", str)),
                per_file=_typed(document, "per_file", int),
                head=_anchor(_typed(document, "head", dict)),
                parts=tuple(_part(p) for p in _typed(document, "files", list)),
            )
            if _typed(document, "events", int) != manifest.events:
                raise ValueError(
                    f"events is {document['events']}, its files hold {manifest.events}"
                )
        except (ValueError, TypeError, Invalid) as exc:
            raise RestoreRefused("bad manifest", str(exc), file=MANIFEST) from None
        manifest._check_anchors()
        return manifest

    def _check_anchors(self) -> None:
        previous = GENESIS
        names: set[str] = set()
        for part in self.parts:
            if part.name in names:
                raise RestoreRefused("bad manifest", f"{part.name} is listed twice", file=MANIFEST)
            names.add(part.name)
            if part.start != previous:
                raise RestoreRefused(
                    "manifest mismatch",
                    f"{part.name} starts after position {part.start.position} "
                    f"({part.start.hash.hex()[:12]}…), the file before it ends at "
                    f"{previous.position} ({previous.hash.hex()[:12]}…)",
                    file=MANIFEST,
                    position=previous.position + 1,
                )
            if part.first_position != previous.position + 1 or part.end.position != (
                part.last_position
            ):
                raise RestoreRefused(
                    "manifest mismatch",
                    f"{part.name}: positions {part.first_position}-{part.last_position} do not "
                    f"follow its anchors ({part.start.position}, {part.end.position})",
                    file=MANIFEST,
                    position=previous.position + 1,
                )
            previous = part.end
        if self.head != previous:
            raise RestoreRefused(
                "manifest mismatch",
                f"the head is position {self.head.position}, the last file ends at "
                f"{previous.position}",
                file=MANIFEST,
            )


def part_name(index: int) -> str:
    """The ``index``-th file's name (from 1): names sort in position order."""
    return f"events-{index:06d}.jsonl.gz"


def encode_line(row: StoredRow) -> bytes:
    """``row`` as one line of an export: the canonical JSON of its columns (the data's too:
    the database keeps jsonb in an order of its own), so that a line is the record's one
    byte form."""
    line = row._asdict()
    line["data"] = orjson.loads(row.data)
    line["hash"] = row.hash.hex()
    return canonical_json(line) + b"\n"


def decode_line(line: bytes) -> StoredRow:
    """The row a line of an export holds, ``data`` in canonical JSON; :class:`ValueError`
    (``orjson.JSONDecodeError`` for what does not parse) saying what is wrong."""
    value = orjson.loads(line)
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    if missing := [c for c in COLUMNS if c not in value]:
        raise TypeError(f"no {', '.join(missing)}")
    if extra := sorted(set(value) - set(COLUMNS)):
        raise TypeError(f"unknown {', '.join(extra)}")
    fields: dict[str, Any] = {}
    for name in _INTS:
        fields[name] = _typed(value, name, int)
    for name in _TEXTS:
        fields[name] = _typed(value, name, str)
    for name in _TIMES:
        fields[name] = parse_timestamp(_typed(value, name, str))
    for name in _UUIDS:
        raw = value[name]
        if raw is None and name != "event_id":
            fields[name] = None
        else:
            fields[name] = UUID(_typed(value, name, str))
    if not isinstance(value["data"], dict):
        raise TypeError("data is not a JSON object")
    fields["data"] = canonical_json(value["data"])
    digest = _typed(value, "hash", str)
    if not _HEX_HASH.match(digest):
        raise ValueError("hash is not 64 hex digits")
    fields["hash"] = bytes.fromhex(digest)
    return StoredRow(**fields)


def chain_link(previous: bytes, row: StoredRow) -> bytes:
    """The hash ``row`` must hold after ``previous``: what ``verify`` computes from the
    stored row (:func:`ledger.store.chain.record_hash` over the envelope, ``data`` being
    canonical JSON already)."""
    recorded = RecordedEvent(
        row.position,
        row.version,
        row.recorded_at,
        row.event_id,
        row.type,
        row.schema_version,
        row.stream,
        row.occurred_at,
        row.observed_at,
        row.source,
        row.causation_id,
        row.correlation_id,
        {},  # the data goes in as its canonical bytes below
    )
    return record_hash(
        previous, row.position, row.version, row.recorded_at, recorded.envelope, row.data
    )


def _typed(document: dict[str, Any], key: str, kind: type[Any]) -> Any:
    value = document.get(key)
    # a JSON true is no count (bool is an int to Python)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key} is {type(value).__name__}, not {kind.__name__}")
    return value


def _anchor(value: dict[str, Any]) -> Anchor:
    digest = _typed(value, "hash", str)
    if not _HEX_HASH.match(digest):
        raise ValueError(f"anchor hash {digest!r} is not 64 hex digits")
    return Anchor(_typed(value, "position", int), bytes.fromhex(digest))


def _part(value: Any) -> Part:
    if not isinstance(value, dict):
        raise TypeError("a file entry is not a JSON object")
    name = _typed(value, "name", str)
    if not _PART_NAME.match(name):  # nothing outside the export's directory is ever read
        raise ValueError(f"file name {name!r} is not an export part's (events-NNNNNN.jsonl.gz)")
    sha256 = _typed(value, "sha256", str)
    if not _HEX_HASH.match(sha256):
        raise ValueError(f"{name}: sha256 is not 64 hex digits")
    part = Part(
        name=name,
        first_position=_typed(value, "first_position", int),
        last_position=_typed(value, "last_position", int),
        events=_typed(value, "events", int),
        start=_anchor(_typed(value, "start", dict)),
        end=_anchor(_typed(value, "end", dict)),
        sha256=sha256,
    )
    # whether its lines fill these positions is for the load to find, line by line
    if part.events < 1 or part.last_position < part.first_position:
        raise ValueError(
            f"{name}: {part.events} events at positions {part.first_position}-{part.last_position}"
        )
    return part
