"""The events of an ``apply`` (a quota tree, budgets, later notification rules): one rule
for their ids and the stream versions their append expects.

Applying a file is idempotent, like ``kubectl apply``: the same file applied twice
appends nothing the second time, and two people applying at once cannot both win. So each
event's id derives from its stream, the version it will take there (the stream's version
before the apply plus the events this apply put on it first), its type and a digest of
what it changes; the append expects each stream at the version read, so a concurrent
apply is refused rather than interleaved.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ledger.canonical import canonical_json
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.ids import deterministic_id

__all__ = ["ApplyChange", "apply_envelopes", "content_digest"]


def content_digest(event: EventData) -> str:
    """A digest of what ``event`` says (sha256 of its canonical JSON): two renderings of one
    change digest the same, any difference in it digests differently."""
    return hashlib.sha256(canonical_json(event.model_dump(mode="json"))).hexdigest()


@dataclass(frozen=True)
class ApplyChange:
    """One change of an apply: the event, the stream it goes on, a digest of what it sets."""

    event: EventData
    stream: str
    digest: str


def apply_envelopes(
    changes: Sequence[ApplyChange],
    stream_version: Callable[[str], int],
    *,
    at: datetime,
    source: str,
) -> tuple[list[Envelope], dict[str, int]]:
    """The envelopes of ``changes`` (effective ``at``, by ``source``) and the version the
    append must find on each stream (``stream_version``: the store's, read once each)."""
    expected: dict[str, int] = {}
    taken: dict[str, int] = {}
    envelopes: list[Envelope] = []
    for change in changes:
        stream = change.stream
        if stream not in expected:
            expected[stream] = stream_version(stream)
        version = expected[stream] + taken.get(stream, 0)
        taken[stream] = taken.get(stream, 0) + 1
        event_id = deterministic_id(
            "apply", stream, str(version), change.event.type_name, change.digest
        )
        envelopes.append(
            make_envelope(
                change.event,
                event_id=event_id,
                stream=stream,
                occurred_at=at,
                observed_at=at,
                source=source,
            )
        )
    return envelopes, expected
