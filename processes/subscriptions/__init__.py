"""The subscriptions context's process step: the scheduler's renewals, expiries and daily
recognition (:func:`advance`)."""

from processes.subscriptions.ticks import SCHEDULER_SOURCE, SubscriptionTick, advance

__all__ = ["SCHEDULER_SOURCE", "SubscriptionTick", "advance"]
