"""Changing a running subscription: nodes added mid-term, a node count for the renewal.

- **Nodes added mid-term** are co-terminated with the running term (they end at its
  end) and charged by started day at the term's locked price: the term's daily price per
  node is its unit price / its length in days (28 to 31 for a month, 365 or 366 for a
  year: whole days, terms run from one UTC instant to the same time of another day), and
  the days charged are the days left in the term, every started day counting (as the
  refund rule counts days used, :func:`ledger.subscriptions.terms.days_used`). So
  ``amount = unit price x days left / days in term x nodes``, rounded half-even once;
  nodes added for the whole term cost exactly the term's price, and a yearly term keeps
  its yearly discount.
- **A node count for the renewal** (fewer nodes, or more) is scheduled and applied by the
  next term ordered, by hand or automatically; removing nodes mid-term is refused (the
  refund rule has no partial refund of a term's nodes: cancel, or change at renewal).

Pure: the decisions return the event; the use case (``dlc_ledger/services/subscriptions``)
appends it with its transaction (:func:`ledger.subscriptions.postings.addition_transaction`).
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction

from ledger.errors import Conflict, Invalid
from ledger.events import SubscriptionNodesAdded, SubscriptionNodesChangeScheduled
from ledger.money import to_minor
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.terms import DAY, days_used

__all__ = ["MAX_NODES", "add_nodes", "schedule_nodes"]

#: nodes one subscription may hold (``SubscriptionPurchased.nodes``' bound)
MAX_NODES = 100_000


def _open(sub: Subscription, at: datetime, what: str) -> None:
    if sub.cancelled is not None:
        raise Conflict(
            f"subscription {sub.subscription_id} is cancelled ({sub.cancelled.mode}, effective "
            f"{sub.cancelled.effective_at.isoformat()}): {what} refused"
        )
    if sub.expired is not None or at >= sub.ends_at:
        raise Conflict(
            f"subscription {sub.subscription_id} expired at {sub.ends_at.isoformat()}: "
            f"{what} refused"
        )


def add_nodes(sub: Subscription, nodes: int, at: datetime, key: str) -> SubscriptionNodesAdded:
    """``nodes`` more nodes from ``at`` to the end of the running term, priced by started
    day at the term's locked price. Refused before the subscription starts, once it is
    cancelled or expired, and while a next term is already ordered (it was charged with
    the old count: add the nodes once it has started)."""
    if nodes < 1:
        raise Invalid(f"--nodes must add at least 1 node, got {nodes}")
    _open(sub, at, "adding nodes")
    term = sub.term_at(at)
    if term is None:
        raise Conflict(
            f"subscription {sub.subscription_id} starts at {sub.starts_at.isoformat()}: "
            "add nodes once it runs (or buy another)"
        )
    if sub.last_term.term != term.term:
        raise Conflict(
            f"subscription {sub.subscription_id} has term {sub.last_term.term} ordered "
            f"already (from {sub.last_term.starts_at.isoformat()}, {sub.nodes} node(s)): add "
            "the nodes once it has started, or schedule the count for the renewal after it "
            "(subscriptions change SUB --nodes M --at-renewal)"
        )
    if sub.nodes + nodes > MAX_NODES:
        raise Invalid(f"a subscription holds at most {MAX_NODES} nodes")
    term_days = (term.ends_at - term.starts_at) // DAY
    days = days_used(at, term.ends_at)  # the days left, every started one counting
    price = Fraction(term.unit_price) * nodes * days / term_days
    amount = to_minor(price, sub.scale)  # days <= term_days: never above the term's price
    part = term.model_copy(
        update={"starts_at": at, "ordered_at": at, "amount_minor": amount},
    )
    return SubscriptionNodesAdded(
        subscription_id=sub.subscription_id,
        addition=len(sub.additions) + 1,
        nodes=nodes,
        nodes_after=sub.nodes_at(at) + nodes,
        days=days,
        term_days=term_days,
        part=part,
        key=key,
    )


def schedule_nodes(
    sub: Subscription, nodes: int, at: datetime, key: str
) -> SubscriptionNodesChangeScheduled:
    """Order the next term (the first one not yet ordered) with ``nodes`` nodes."""
    if nodes < 1:
        raise Invalid(
            f"--nodes must leave at least 1 node, got {nodes}: to stop, cancel the "
            "subscription (subscriptions cancel SUB)"
        )
    if nodes > MAX_NODES:
        raise Invalid(f"a subscription holds at most {MAX_NODES} nodes")
    _open(sub, at, "changing the node count")
    return SubscriptionNodesChangeScheduled(
        subscription_id=sub.subscription_id,
        nodes=nodes,
        from_term=sub.last_term.term + 1,
        requested_at=at,
        key=key,
    )
