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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction

from ledger.events import SubscriptionTerm
from ledger.money import to_minor
from ledger.subscriptions.terms import days_used

__all__ = ["NO_REASON_WINDOW", "Refund", "TermRefund", "refund_for"]

NO_REASON_WINDOW = timedelta(days=5)
_DAYS_PER_MONTH = 30


@dataclass(frozen=True)
class TermRefund:
    term: int
    paid_minor: int
    consumed_minor: int
    refund_minor: int
    why: str


@dataclass(frozen=True)
class Refund:
    terms: tuple[TermRefund, ...]
    no_reason: bool  # the 5-day full refund was used

    @property
    def amount_minor(self) -> int:
        return sum(t.refund_minor for t in self.terms)

    @property
    def rule(self) -> str:
        return "; ".join(f"term {t.term}: {t.why}" for t in self.terms) or "nothing to refund"


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
