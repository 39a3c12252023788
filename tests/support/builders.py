"""Event builders for projection tests: a tiny cluster narrated one event at a time."""

from __future__ import annotations

from datetime import datetime, timedelta

from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import ReplicaSpec
from ledger.ids import deterministic_id
from tests.support.factories import EPOCH

__all__ = ["EPOCH", "Narrator", "at", "replica"]


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def replica(mgpu: int = 1000, cpu_milli: int = 4000, memory_mib: int = 8192) -> ReplicaSpec:
    return ReplicaSpec(mgpu=mgpu, cpu_milli=cpu_milli, memory_mib=memory_mib)


class Narrator:
    """Builds envelopes with unique deterministic ids, in the order they are told."""

    def __init__(self, salt: str = "test") -> None:
        self.salt = salt
        self.count = 0
        self.events: list[Envelope] = []

    def tell(
        self, data: EventData, stream: str, when: datetime, *, source: str = "kube-watcher/test"
    ) -> Envelope:
        self.count += 1
        envelope = make_envelope(
            data,
            event_id=deterministic_id(self.salt, str(self.count)),
            stream=stream,
            occurred_at=when,
            observed_at=when,
            source=source,
        )
        self.events.append(envelope)
        return envelope
