"""A subscription's state, folded from its events: terms, cancellation, expiry.

Pure: the state is what ``SubscriptionPurchased`` / ``Renewed`` / ``RenewalFailed`` /
``Cancelled`` / ``Expired`` say, in stream order, so every read (list, capacity,
billing, the scheduler's renewals) agrees with a replay of the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from ledger.envelopes import EventData
from ledger.events import (
    NodeSpec,
    SubscriptionCancelled,
    SubscriptionExpired,
    SubscriptionPurchased,
    SubscriptionRenewalFailed,
    SubscriptionRenewed,
    SubscriptionTerm,
)

__all__ = [
    "RELEASE_GRACE",
    "RENEWAL_LEAD",
    "Status",
    "Subscription",
    "fold_subscriptions",
]

#: Auto-renewal orders the next term from this long before expiry.
RENEWAL_LEAD = timedelta(days=3)
#: Expired capacity stops being schedulable at expiry and is released this long after.
RELEASE_GRACE = timedelta(hours=24)

Status = Literal["pending", "active", "cancelling", "cancelled", "expired"]


@dataclass(frozen=True)
class Subscription:
    subscription_id: str
    group: str
    spec: str
    nodes: int
    workspace: str
    currency: str
    scale: int
    node: NodeSpec
    auto_renew: bool
    terms: tuple[SubscriptionTerm, ...]
    key: str | None = None
    cancelled: SubscriptionCancelled | None = None
    expired: SubscriptionExpired | None = None
    renewal_failures: tuple[SubscriptionRenewalFailed, ...] = field(default=())

    @property
    def starts_at(self) -> datetime:
        return self.terms[0].starts_at

    @property
    def last_term(self) -> SubscriptionTerm:
        return self.terms[-1]

    @property
    def ends_at(self) -> datetime:
        """When its capacity stops being schedulable: the cancellation's instant when
        cancelled immediately, else the end of the last paid term that runs."""
        if self.cancelled is not None and self.cancelled.mode == "immediately":
            return self.cancelled.effective_at
        if self.cancelled is not None:
            return self.cancelled.effective_at  # end of the term it was cancelled in
        return self.last_term.ends_at

    @property
    def released_at(self) -> datetime:
        """When its capacity is released (jobs still on it are stopped)."""
        if self.cancelled is not None and self.cancelled.mode == "immediately":
            return self.cancelled.effective_at
        return self.ends_at + RELEASE_GRACE

    def schedulable_at(self, t: datetime) -> bool:
        return self.starts_at <= t < self.ends_at

    def status(self, at: datetime) -> Status:
        if at < self.starts_at:
            return "pending"
        if at >= self.ends_at:
            if self.cancelled is not None and self.cancelled.mode == "immediately":
                return "cancelled"
            return "expired"
        return "cancelling" if self.cancelled is not None else "active"

    def term_at(self, t: datetime) -> SubscriptionTerm | None:
        for term in self.terms:
            if term.starts_at <= t < term.ends_at:
                return term
        return None

    def after(self, event: EventData) -> Subscription:
        """This subscription once ``event`` (a later event of its stream) has happened: what
        the fold does, and what a decision expects its own event to make of it."""
        if isinstance(event, SubscriptionRenewed):
            return replace(self, terms=(*self.terms, event.next), renewal_failures=())
        if isinstance(event, SubscriptionRenewalFailed):
            return replace(self, renewal_failures=(*self.renewal_failures, event))
        if isinstance(event, SubscriptionCancelled):
            return replace(self, cancelled=event, auto_renew=False)
        if isinstance(event, SubscriptionExpired):
            return replace(self, expired=event)
        return self

    def renews(self) -> bool:
        """Whether the scheduler may still order a next term."""
        return self.auto_renew and self.cancelled is None and self.expired is None


def _apply(subs: dict[str, Subscription], event: EventData) -> None:
    if isinstance(event, SubscriptionPurchased):
        subs.setdefault(
            event.subscription_id,
            Subscription(
                subscription_id=event.subscription_id,
                group=event.group,
                spec=event.spec,
                nodes=event.nodes,
                workspace=event.workspace,
                currency=event.currency,
                scale=event.scale,
                node=event.node,
                auto_renew=event.auto_renew,
                terms=(event.first,),
                key=event.key,
            ),
        )
        return
    sub = subs.get(getattr(event, "subscription_id", ""))
    if sub is not None:
        subs[sub.subscription_id] = sub.after(event)


def fold_subscriptions(events: Iterable[EventData]) -> dict[str, Subscription]:
    """Every subscription's state after ``events`` (in store order), by id."""
    subs: dict[str, Subscription] = {}
    for event in events:
        _apply(subs, event)
    return subs
