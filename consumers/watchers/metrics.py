"""Prometheus metrics of the Kubernetes watchers: events out, by event type.

The event type is a small fixed set (the ledger's fact types), so it is a safe label;
a stalled watcher shows as a flat ``rate()`` while the cluster is busy.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter

from ledger.envelopes import Envelope

__all__ = ["EVENTS_EMITTED", "record_emitted"]

EVENTS_EMITTED = Counter(
    "dlc_watcher_events_total", "Facts the watchers derived and handed to the outbox", ["type"]
)


def record_emitted(events: Iterable[Envelope]) -> None:
    for envelope in events:
        EVENTS_EMITTED.labels(envelope.type).inc()
