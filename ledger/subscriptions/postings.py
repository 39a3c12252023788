"""The books of a subscription: charge into deferred revenue, recognise daily, refund.

- A term ordered (purchase or renewal) is invoiced in full at order time: debit
  ``receivable/<workspace>``, credit ``deferred/subscription/<id>``.
- Each UTC day of a running term moves its share (:mod:`.recognition`) from deferred
  to ``revenue/subscription/<spec>``; a payment never touches revenue.
- Nodes added mid-term (:class:`SubscriptionNodesAdded`) are billed like a term of their
  own: in full when added, into the same deferred account, recognised day by day from
  the instant they were added to the term's end (:func:`addition_transaction`).
- A cancellation clears what is still deferred: the refund goes back to the
  receivable (a credit line on the invoice of the cancellation's month) and the rest,
  consumed but not yet recognised, to revenue (negative when the no-reason refund
  gives back revenue already recognised).

Transaction ids derive from (subscription, term, what, day), so a retried tick or a
concurrent scheduler can never post a day twice: the store collapses duplicates.

Each is dated into the period of its own instant (the order, the day, the cancellation);
given the period ``locks``, one dated into a closed period is booked into the earliest
open one as an adjustment naming its dates (:func:`ledger.periods.book_into_open`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from ledger.accounts import balanced_transaction, receivable_account
from ledger.events import (
    LedgerTransactionPosted,
    Posting,
    SubscriptionCharge,
    SubscriptionNodesAdded,
    SubscriptionTerm,
)
from ledger.ids import deterministic_id
from ledger.periods import PeriodLocks, book_into_open
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.recognition import recognised_by, recognition_days
from ledger.subscriptions.refunds import Refund

__all__ = [
    "DEFERRED",
    "addition_transaction",
    "charge_transaction",
    "deferred_account",
    "recognition_transactions",
    "refund_transaction",
    "subscription_revenue_account",
]

DEFERRED = "deferred/subscription"

ChargeKind = Literal["purchase", "renewal", "refund", "add-nodes"]


def deferred_account(subscription_id: str) -> str:
    return f"{DEFERRED}/{subscription_id}"


def subscription_revenue_account(spec: str) -> str:
    return f"revenue/subscription/{spec}"


def _period(t: datetime) -> str:
    t = t.astimezone(UTC)  # periods are UTC months, whatever offset an instant came in
    return f"{t.year:04d}-{t.month:02d}"


def _charge(
    sub: Subscription, term: SubscriptionTerm, kind: ChargeKind, detail: str
) -> SubscriptionCharge:
    return SubscriptionCharge(
        subscription_id=sub.subscription_id,
        term=term.term,
        kind=kind,
        workspace=sub.workspace,
        group=sub.group,
        spec=sub.spec,
        nodes=sub.nodes,
        unit=term.unit,
        unit_price=term.unit_price,
        starts_at=term.starts_at,
        ends_at=term.ends_at,
        detail=detail,
    )


def _span(term: SubscriptionTerm) -> str:
    return f"{term.starts_at:%Y-%m-%d} to {term.ends_at:%Y-%m-%d}"


def _booked(
    txn: LedgerTransactionPosted, locks: PeriodLocks | None, service: str
) -> LedgerTransactionPosted:
    return txn if locks is None else book_into_open(txn, locks, service=service)


def charge_transaction(
    sub: Subscription,
    term: SubscriptionTerm,
    cause_event_id: str,
    *,
    locks: PeriodLocks | None = None,
) -> LedgerTransactionPosted | None:
    """The order of ``term`` (None for a free one): receivable / deferred, in full."""
    if term.amount_minor == 0:
        return None
    kind: ChargeKind = "purchase" if term.term == 1 else "renewal"
    txn = balanced_transaction(
        str(deterministic_id("txn-subscription", sub.subscription_id, str(term.term), "charge")),
        [
            Posting(
                account=receivable_account(sub.workspace),
                amount_minor=term.amount_minor,
                currency=sub.currency,
            ),
            Posting(
                account=deferred_account(sub.subscription_id),
                amount_minor=-term.amount_minor,
                currency=sub.currency,
            ),
        ],
        cause_event_ids=(cause_event_id,),
        period=_period(term.ordered_at),
        memo=f"subscription {sub.subscription_id} term {term.term} ordered ({kind})",
        charge=_charge(sub, term, kind, ""),
    )
    return _booked(txn, locks, _span(term))


def addition_transaction(
    sub: Subscription,
    added: SubscriptionNodesAdded,
    cause_event_id: str,
    *,
    locks: PeriodLocks | None = None,
) -> LedgerTransactionPosted | None:
    """Nodes added mid-term (None when free): receivable / deferred, in full when added."""
    part = added.part
    if part.amount_minor == 0:
        return None
    detail = f"{added.days} of {added.term_days} day(s) of term {part.term}"
    charge = _charge(sub, part, "add-nodes", detail).model_copy(update={"nodes": added.nodes})
    txn = balanced_transaction(
        str(
            deterministic_id(
                "txn-subscription", sub.subscription_id, "add", str(added.addition), "charge"
            )
        ),
        [
            Posting(
                account=receivable_account(sub.workspace),
                amount_minor=part.amount_minor,
                currency=sub.currency,
            ),
            Posting(
                account=deferred_account(sub.subscription_id),
                amount_minor=-part.amount_minor,
                currency=sub.currency,
            ),
        ],
        cause_event_ids=(cause_event_id,),
        period=_period(part.ordered_at),
        memo=f"subscription {sub.subscription_id} term {part.term}: {added.nodes} node(s) "
        f"added ({detail})",
        charge=charge,
    )
    return _booked(txn, locks, _span(part))


def _recognition_key(sub: Subscription, term: SubscriptionTerm, addition: int) -> tuple[str, ...]:
    # a term's own days keep the ids they always had; an addition's are its own
    if addition == 0:
        return (sub.subscription_id, str(term.term))
    return (sub.subscription_id, str(term.term), "add", str(addition))


def recognition_transactions(
    sub: Subscription, until: datetime, *, locks: PeriodLocks | None = None
) -> list[tuple[datetime, LedgerTransactionPosted]]:
    """Every day of ``sub``'s terms that has ended by ``until`` (the scheduler's reach),
    recognised, with the instant each day ends; a term's days stop at its end or at a
    cancellation, whichever is first."""
    stop = sub.cancelled.effective_at if sub.cancelled is not None else None
    out = []
    for term, _nodes, addition in sub.parts():
        label = f"term {term.term}" + (f" addition {addition}" if addition else "")
        for lo, hi, amount in recognition_days(term, stop or term.ends_at):
            if hi > until:
                break
            out.append(
                (
                    hi,
                    balanced_transaction(
                        str(
                            deterministic_id(
                                "txn-subscription",
                                *_recognition_key(sub, term, addition),
                                "recognise",
                                lo.isoformat(),
                            )
                        ),
                        [
                            Posting(
                                account=deferred_account(sub.subscription_id),
                                amount_minor=amount,
                                currency=sub.currency,
                            ),
                            Posting(
                                account=subscription_revenue_account(sub.spec),
                                amount_minor=-amount,
                                currency=sub.currency,
                            ),
                        ],
                        period=_period(lo),
                        memo=f"subscription {sub.subscription_id} {label}: "
                        f"recognised {lo.isoformat()} to {hi.isoformat()}",
                    ),
                )
            )
    if locks is not None:  # a day of a closed period: recognised in the open one
        out = [(hi, book_into_open(txn, locks)) for hi, txn in out]
    return out


def refund_transaction(
    sub: Subscription,
    refund: Refund,
    at: datetime,
    cause_event_id: str,
    *,
    locks: PeriodLocks | None = None,
) -> LedgerTransactionPosted | None:
    """Clear what ``sub``'s refunded terms still defer at ``at``: the refund back to the
    receivable, the rest (consumed, not yet recognised) to revenue."""
    terms = {t.term: t for t in sub.terms}
    parts = {(p.term, addition): p for p, _nodes, addition in sub.parts()}
    deferred = 0
    for part in refund.terms:
        term = parts[(part.term, part.addition)]
        deferred += term.amount_minor - recognised_by(term, at)
    refund_minor = refund.amount_minor
    if deferred == 0 and refund_minor == 0:
        return None
    postings = [
        Posting(
            account=deferred_account(sub.subscription_id),
            amount_minor=deferred,
            currency=sub.currency,
        ),
    ]
    if refund_minor:
        postings.append(
            Posting(
                account=receivable_account(sub.workspace),
                amount_minor=-refund_minor,
                currency=sub.currency,
            )
        )
    if deferred - refund_minor:
        postings.append(
            Posting(
                account=subscription_revenue_account(sub.spec),
                amount_minor=refund_minor - deferred,
                currency=sub.currency,
            )
        )
    first = terms[refund.terms[0].term]
    txn = balanced_transaction(
        str(deterministic_id("txn-subscription", sub.subscription_id, "refund")),
        postings,
        cause_event_ids=(cause_event_id,),
        period=_period(at),
        memo=f"subscription {sub.subscription_id} cancelled: {refund.rule}",
        charge=_charge(sub, first, "refund", refund.rule) if refund_minor else None,
    )
    return _booked(txn, locks, f"cancelled {at:%Y-%m-%d}")
