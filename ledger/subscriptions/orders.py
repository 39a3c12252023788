"""Ordering a term: the price in force at the order, locked into the term.

A purchase and a renewal both order a term of the subscription's unit (month or year)
at the spec's price in force when ordered (a new price book changes the next term
only); the term's amount is nodes x that price, exact at the book's scale.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ledger.errors import Invalid
from ledger.events import SubscriptionTerm, SubscriptionTermUnit
from ledger.money import to_minor
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.specs import SpecSchedule
from ledger.subscriptions.terms import anchored_end, term_end

__all__ = ["next_term", "order_term"]


def order_term(
    specs: SpecSchedule,
    spec: str,
    unit: SubscriptionTermUnit,
    nodes: int,
    *,
    term: int,
    starts_at: datetime,
    ordered_at: datetime,
    currency: str | None = None,
    anchor: datetime | None = None,
) -> SubscriptionTerm:
    """Term number ``term`` of ``nodes`` nodes of ``spec`` from ``starts_at``, priced at
    ``ordered_at`` (:class:`~ledger.subscriptions.specs.UnknownSpec` when not sold then).
    ``anchor``: the subscription's start, on which its terms' ends are anchored."""
    starts_at, ordered_at = starts_at.astimezone(UTC), ordered_at.astimezone(UTC)
    ends_at = term_end(starts_at, unit)
    if anchor is not None:
        # never before a month (year) clamped from the start: a term stored before terms
        # were anchored (ending the 28th) still gets a whole one
        ends_at = max(anchored_end(anchor, unit, term), ends_at)
    section, node = specs.spec_at(spec, ordered_at)
    if currency is not None and section.currency != currency:
        raise Invalid(
            f"price book {section.book_id!r} is in {section.currency}, the subscription in "
            f"{currency}: a term cannot change currency"
        )
    price = node.monthly if unit == "month" else node.yearly
    return SubscriptionTerm(
        term=term,
        unit=unit,
        starts_at=starts_at,
        ends_at=ends_at,
        unit_price=price,
        monthly_price=node.monthly,
        yearly_price=node.yearly,
        amount_minor=to_minor(price * nodes, section.scale),
        book_id=section.book_id,
        ordered_at=ordered_at,
    )


def next_term(sub: Subscription, specs: SpecSchedule, ordered_at: datetime) -> SubscriptionTerm:
    """The term after ``sub``'s last one, ordered at ``ordered_at``."""
    last = sub.last_term
    return order_term(
        specs,
        sub.spec,
        last.unit,
        sub.renewal_nodes,  # a change scheduled for the renewal, else the nodes held
        term=last.term + 1,
        starts_at=last.ends_at,
        ordered_at=ordered_at,
        currency=sub.currency,
        anchor=sub.starts_at,
    )
