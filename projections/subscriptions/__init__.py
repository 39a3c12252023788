"""The subscriptions context's views: subscriptions and node specs read from the store, and
the utilisation report's occupancies. Its scheduler (renewals, expiries, daily
recognition) is a process step: :mod:`processes.subscriptions`."""

from projections.subscriptions.reads import (
    SUBSCRIPTION_TYPES,
    load_specs,
    load_subscriptions,
    subscription_stream,
)
from projections.subscriptions.usage import gpu_spans

__all__ = [
    "SUBSCRIPTION_TYPES",
    "gpu_spans",
    "load_specs",
    "load_subscriptions",
    "subscription_stream",
]
