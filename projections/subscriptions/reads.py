"""Subscriptions and node specs as the store holds them, folded on read.

There are few subscription events (a handful per group per year), so every read folds
them from the store (:func:`ledger.subscriptions.fold_subscriptions`) instead of keeping
tables: a read is always at the head and a rebuild has nothing to disagree with.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ledger.catalogue import decode
from ledger.envelopes import EventData
from ledger.events import SubscriptionPricesPublished
from ledger.store.base import EventStore, RecordedEvent
from ledger.subscriptions import SpecSchedule, Subscription, fold_subscriptions

__all__ = [
    "SUBSCRIPTION_TYPES",
    "load_specs",
    "load_subscriptions",
    "subscription_stream",
]

SUBSCRIPTION_TYPES = (
    "SubscriptionPurchased",
    "SubscriptionRenewed",
    "SubscriptionRenewalFailed",
    "SubscriptionCancelled",
    "SubscriptionExpired",
)


def subscription_stream(subscription_id: str) -> str:
    return f"subscription/{subscription_id}"


def _records(
    store: EventStore, types: Sequence[str], upto: datetime | None = None
) -> list[RecordedEvent]:
    out: list[RecordedEvent] = []
    position = 0
    while True:
        page = store.read_by_type(types, after_position=position, limit=1000)
        if not page:
            return out
        out.extend(r for r in page if upto is None or r.recorded_at <= upto)
        position = page[-1].position


def load_subscriptions(store: EventStore) -> dict[str, Subscription]:
    """Every subscription's state, by id, from its events in store order."""
    events: list[EventData] = [decode(r.envelope) for r in _records(store, SUBSCRIPTION_TYPES)]
    return fold_subscriptions(events)


def load_specs(store: EventStore) -> SpecSchedule:
    """The node specs and prices of every published subscription section."""
    sections = []
    for record in _records(store, ("SubscriptionPricesPublished",)):
        data = decode(record.envelope)
        assert isinstance(data, SubscriptionPricesPublished)
        sections.append(data)
    return SpecSchedule(sections)
