"""The subscriptions context: subscriptions and node specs read from the store, the
scheduler's renewals, expiries and daily recognition, and the utilisation report."""

from projections.subscriptions.reads import (
    SUBSCRIPTION_TYPES,
    load_specs,
    load_subscriptions,
    subscription_stream,
)
from projections.subscriptions.ticks import SCHEDULER_SOURCE, SubscriptionTick, advance

__all__ = [
    "SCHEDULER_SOURCE",
    "SUBSCRIPTION_TYPES",
    "SubscriptionTick",
    "advance",
    "load_specs",
    "load_subscriptions",
    "subscription_stream",
]
