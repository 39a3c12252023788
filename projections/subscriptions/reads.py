"""Subscriptions and node specs as the store holds them, folded on read.

There are few subscription events (a handful per group per year), so every read folds
them from the store (:func:`ledger.subscriptions.fold_subscriptions`) instead of keeping
tables: a read is always at the head and a rebuild has nothing to disagree with.
"""

from __future__ import annotations

from ledger.catalogue import decode
from ledger.envelopes import EventData
from ledger.events import SubscriptionPricesPublished
from ledger.store.base import EventStore, UnitOfWork, read_all_of_types
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
    "SubscriptionNodesAdded",
    "SubscriptionNodesChangeScheduled",
    "SubscriptionSpecChanged",
)


def subscription_stream(subscription_id: str) -> str:
    return f"subscription/{subscription_id}"


#: where the events are read from: the store, or a unit of work that decides on them
Source = EventStore | UnitOfWork


def load_subscriptions(source: Source) -> dict[str, Subscription]:
    """Every subscription's state, by id, from its events in store order."""
    events: list[EventData] = [
        decode(r.envelope) for r in read_all_of_types(source, SUBSCRIPTION_TYPES)
    ]
    return fold_subscriptions(events)


def load_specs(source: Source) -> SpecSchedule:
    """The node specs and prices of every published subscription section."""
    sections = []
    for record in read_all_of_types(source, ("SubscriptionPricesPublished",)):
        data = decode(record.envelope)
        assert isinstance(data, SubscriptionPricesPublished)
        sections.append(data)
    return SpecSchedule(sections)
