"""The unsubscription refund rule (the platform's, after Alibaba Cloud's).

For each term at the cancellation instant ``at``:

- a term not yet started (a renewal ordered ahead) is refunded in full;
- a term already over is not refunded;
- the running term refunds what was paid minus what was consumed, never below zero:
  consumed = the daily unit price at the discount of the duration actually used x
  days used (each started day counts) x nodes. A yearly term left before a year loses
  the yearly discount: its days are priced at the monthly price / 30, as a monthly
  term's are;
- except: within 5 days of a subscription's start, the first term is refunded in full,
  once per paying workspace per calendar year (the no-reason refund).

Nodes added mid-term (:func:`refund_of`) are refunded part by part by the same rule: each
addition is a running part of its own from the instant it was added, its days used
counted from then, at its nodes (never the no-reason refund).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from fractions import Fraction

from ledger.events import SubscriptionTerm
from ledger.money import to_minor
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.terms import days_used

__all__ = ["NO_REASON_WINDOW", "Refund", "TermRefund", "refund_for", "refund_of"]

NO_REASON_WINDOW = timedelta(days=5)
_DAYS_PER_MONTH = 30


@dataclass(frozen=True)
class TermRefund:
    term: int
    paid_minor: int
    consumed_minor: int
    refund_minor: int
    why: str
    addition: int = 0  # 0: the term itself; k: the k-th nodes added (co-terminated)

    @property
    def label(self) -> str:
        return f"term {self.term}" + (f" addition {self.addition}" if self.addition else "")


@dataclass(frozen=True)
class Refund:
    terms: tuple[TermRefund, ...]
    no_reason: bool  # the 5-day full refund was used

    @property
    def amount_minor(self) -> int:
        return sum(t.refund_minor for t in self.terms)

    @property
    def rule(self) -> str:
        return "; ".join(f"{t.label}: {t.why}" for t in self.terms) or "nothing to refund"


def _running(term: SubscriptionTerm, nodes: int, at: datetime, scale: int) -> TermRefund:
    used = days_used(term.starts_at, at)
    # exact (a Fraction): a Decimal quotient rounds at 28 digits, and a half-cent with it
    consumed = min(
        term.amount_minor,
        to_minor(Fraction(term.monthly_price) * used * nodes / _DAYS_PER_MONTH, scale),
    )
    refund = max(0, term.amount_minor - consumed)
    why = (
        f"paid {term.amount_minor} - consumed {consumed} ({used} day(s) x {nodes} node(s) x "
        f"monthly {term.monthly_price} / {_DAYS_PER_MONTH}) = refund {refund} minor units"
    )
    return TermRefund(term.term, term.amount_minor, consumed, refund, why)


def refund_for(
    terms: tuple[SubscriptionTerm, ...],
    nodes: int,
    at: datetime,
    scale: int,
    *,
    no_reason_available: bool,
    from_term_end: datetime | None = None,
) -> Refund:
    """The refund of cancelling at ``at``. ``from_term_end`` set: an end-of-term
    cancellation effective then, which refunds only the terms starting at or after it."""
    out: list[TermRefund] = []
    no_reason = False
    for term in terms:
        if from_term_end is not None:
            if term.starts_at >= from_term_end:
                out.append(
                    TermRefund(
                        term.term,
                        term.amount_minor,
                        0,
                        term.amount_minor,
                        "not started: refunded in full",
                    )
                )
            continue
        if term.ends_at <= at:
            continue
        if term.starts_at >= at:
            out.append(
                TermRefund(
                    term.term,
                    term.amount_minor,
                    0,
                    term.amount_minor,
                    "not started: refunded in full",
                )
            )
        elif term.term == 1 and no_reason_available and at - term.starts_at < NO_REASON_WINDOW:
            no_reason = True
            out.append(
                TermRefund(
                    term.term,
                    term.amount_minor,
                    0,
                    term.amount_minor,
                    "cancelled within 5 days: the no-reason full refund",
                )
            )
        else:
            out.append(_running(term, nodes, at, scale))
    return Refund(tuple(out), no_reason)


def refund_of(
    sub: Subscription,
    at: datetime,
    *,
    no_reason_available: bool,
    from_term_end: datetime | None = None,
) -> Refund:
    """:func:`refund_for` of ``sub``'s terms (the running one at the nodes it was ordered
    with) and of the nodes added to them, each addition a running part of its own."""
    running = sub.term_at(at)
    nodes = sub.nodes_of(running.term) if running is not None else sub.nodes
    base = refund_for(
        sub.terms,
        nodes,
        at,
        sub.scale,
        no_reason_available=no_reason_available,
        from_term_end=from_term_end,
    )
    if from_term_end is not None:  # additions end with their term: nothing after it
        return base
    out = list(base.terms)
    for added in sub.additions:
        part = added.part
        if part.ends_at <= at:
            continue
        if part.starts_at >= at:
            whole = TermRefund(part.term, part.amount_minor, 0, part.amount_minor, "")
            out.append(replace(whole, why="not started: refunded in full"))
        else:
            out.append(_running(part, added.nodes, at, sub.scale))
        out[-1] = replace(out[-1], addition=added.addition)
    return Refund(tuple(out), base.no_reason)
