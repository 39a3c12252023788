"""The digests every store adapter computes the same way: the hash chain and the fact.

One definition, so an event stored by any adapter hashes alike and ``verify`` means the
same everywhere (docs/store.md: "What the same event means", the ``hash`` column).
No database here: the in-memory adapter uses it without a driver.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from ledger.canonical import Fragment, canonical_json
from ledger.envelopes import Envelope, fact_fields

__all__ = ["GENESIS_HASH", "dedupe_batch", "fact_hash", "record_hash", "stored_fact_hash"]

GENESIS_HASH = b"\x00" * 32


def fact_hash(envelope: Envelope, data_json: bytes | None = None) -> bytes:
    """What decides whether a repeated event id is "the same event" (see docs/store.md)."""
    data = Fragment(data_json) if data_json is not None else None
    return hashlib.sha256(canonical_json(envelope.fact(data))).digest()


def stored_fact_hash(
    type_: str, schema_version: int, stream: str, occurred_at: datetime, data: Any
) -> bytes:
    """:func:`fact_hash` of a stored event, from its columns."""
    fact = fact_fields(type_, schema_version, stream, occurred_at, data)
    return hashlib.sha256(canonical_json(fact)).digest()


def record_hash(
    previous: bytes,
    position: int,
    version: int,
    recorded_at: datetime,
    envelope: Envelope,
    data_json: bytes | None = None,
) -> bytes:
    """sha256(previous hash ‖ canonical JSON of the record), the chain's link."""
    record = envelope.to_wire(Fragment(data_json) if data_json is not None else None)
    record["position"] = position
    record["version"] = version
    record["recorded_at"] = recorded_at
    return hashlib.sha256(previous + canonical_json(record)).digest()


def dedupe_batch(
    events: Iterable[Envelope],
    duplicates: list[UUID],
    conflict: Callable[[Envelope], None],
) -> list[tuple[Envelope, bytes]]:
    """A batch's events once each, with their canonical payload JSON.

    An id repeated within the batch with the same fact goes to ``duplicates``; with a
    different fact, to ``conflict`` (which raises or records a dead letter).
    """
    batch: list[tuple[Envelope, bytes]] = []
    seen: dict[UUID, tuple[Envelope, bytes]] = {}
    for envelope in events:
        data_json = canonical_json(envelope.data)
        earlier = seen.get(envelope.event_id)
        if earlier is not None:
            # the fact's hash is only ever needed to compare a repeated id
            if fact_hash(earlier[0], earlier[1]) != fact_hash(envelope, data_json):
                conflict(envelope)
            else:
                duplicates.append(envelope.event_id)
            continue
        seen[envelope.event_id] = (envelope, data_json)
        batch.append((envelope, data_json))
    return batch
