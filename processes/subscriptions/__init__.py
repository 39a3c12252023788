"""The subscriptions context's process steps: a renewal, decided once (:func:`renewal`,
for the scheduler and a renewal by hand), and the scheduler's renewals, expiries and daily
recognition (:func:`advance`)."""

from processes.subscriptions.renewals import renewal
from processes.subscriptions.ticks import SCHEDULER_SOURCE, SubscriptionTick, advance

__all__ = ["SCHEDULER_SOURCE", "SubscriptionTick", "advance", "renewal"]
