"""Double-entry bookkeeping: account names, balanced transactions, reversals.

Money enters the ledger only as ``LedgerTransactionPosted`` events whose postings
sum to zero per currency, so the books always balance and every amount owed by a
workspace is matched by revenue on a named line. Amounts are signed integers in
minor units: debit positive, credit negative. A rating delta debits
``receivable/<workspace>`` and credits ``revenue/<billing_mode>/<resource>``.

Nothing is ever edited: a wrong transaction is undone by a reversal (a new
transaction negating it, linked through ``reverses``) and, where needed, a new
posting. Transaction ids are derived from their causes, so re-rating the same
events yields the same ids and the store's idempotency collapses duplicates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Invalid
from ledger.events import (
    BillingMode,
    LedgerTransactionPosted,
    Posting,
    RatedUsage,
    SubscriptionCharge,
)
from ledger.ids import deterministic_id
from ledger.money import precise_decimal, precise_from_decimal
from ledger.rating import LineDelta

__all__ = [
    "RATER_SOURCE",
    "RECEIVABLE",
    "REVENUE",
    "ROUNDING_ACCOUNT",
    "UnbalancedTransaction",
    "balanced_transaction",
    "balances",
    "check_balanced",
    "receivable_account",
    "revenue_account",
    "reversal",
    "reversal_id",
    "rounding_transaction",
    "rounding_transaction_id",
    "transaction_envelope",
    "transaction_from_delta",
    "transaction_id",
    "transactions_from_deltas",
]

RECEIVABLE = "receivable"
REVENUE = "revenue"
#: Where invoice-line rounding goes (half-even: it nets towards zero over many lines).
ROUNDING_ACCOUNT = "revenue/rounding"


class UnbalancedTransaction(Invalid):
    """A transaction whose postings do not sum to zero in some currency."""


def receivable_account(workspace: str) -> str:
    """What a workspace owes: ``receivable/<workspace>``."""
    if not workspace:
        raise Invalid("workspace must not be empty")
    return f"{RECEIVABLE}/{workspace}"


def revenue_account(billing_mode: BillingMode, resource: str) -> str:
    """Revenue per line: ``revenue/<billing_mode>/<resource>`` (e.g. ``revenue/spot/gpu/any``)."""
    if not resource:
        raise Invalid("resource must not be empty")
    return f"{REVENUE}/{billing_mode}/{resource}"


def balances(postings: Iterable[Posting]) -> dict[str, Decimal]:
    """Sum of posting amounts per currency (exact: summed as precise integers)."""
    sums: dict[str, int] = {}
    for p in postings:
        sums[p.currency] = sums.get(p.currency, 0) + precise_from_decimal(p.amount_minor)
    return {c: precise_decimal(s) for c, s in sums.items()}


def check_balanced(postings: Sequence[Posting]) -> None:
    """Raise :class:`UnbalancedTransaction` unless every currency sums to zero."""
    if not postings:
        raise UnbalancedTransaction("a transaction needs at least one posting")
    off = {c: s for c, s in balances(postings).items() if s != 0}
    if off:
        detail = ", ".join(f"{c} {s:+f}" for c, s in sorted(off.items()))
        raise UnbalancedTransaction(f"postings do not balance: {detail} (minor units)")


def balanced_transaction(
    transaction_id: str,
    postings: Sequence[Posting],
    *,
    cause_event_ids: Sequence[str] = (),
    period: str | None = None,
    memo: str = "",
    reverses: str | None = None,
    usage: RatedUsage | None = None,
    charge: SubscriptionCharge | None = None,
) -> LedgerTransactionPosted:
    """A ``LedgerTransactionPosted`` payload, refused unless it balances per currency."""
    check_balanced(postings)
    return LedgerTransactionPosted(
        transaction_id=transaction_id,
        postings=tuple(postings),
        cause_event_ids=tuple(cause_event_ids),
        period=period,
        memo=memo,
        reverses=reverses,
        usage=usage,
        charge=charge,
    )


def transaction_id(
    occupancy_id: str,
    period: str,
    resource: str,
    billing_mode: BillingMode,
    step: str,
    rate: str = "",
) -> str:
    """Deterministic id of the rating transaction for one line key at one cumulative step.

    ``rate`` (the part of the line, ``ledger.rating.rate_key``) joins the id when set;
    a whole-line key keeps the id it had before lines were split by rate.
    """
    parts = (occupancy_id, period, resource, billing_mode, step, *((rate,) if rate else ()))
    return str(deterministic_id("txn", *parts))


def transaction_from_delta(
    delta: LineDelta,
    *,
    cause_event_ids: Sequence[str] = (),
    period: str | None = None,
    step: str | None = None,
) -> LedgerTransactionPosted:
    """The transaction that posts one accrual/final delta.

    ``step`` overrides the id's step (default ``delta.step``); the rater marks
    final postings with ``<as_of>/final`` so they never share an id with an
    accrual taken at the same instant.

    ``period`` is the posting period; it defaults to the period the usage falls in
    and is set to the next open period when that one is already invoiced (the
    usage keeps its own ``usage_period``).
    """
    line = delta.line
    occ = line.occupancy
    amount = precise_decimal(delta.amount_precise)
    postings = (
        Posting(account=receivable_account(occ.workspace), amount_minor=amount,
                currency=line.currency),
        Posting(account=revenue_account(line.billing_mode, line.resource), amount_minor=-amount,
                currency=line.currency),
    )  # fmt: skip
    usage = RatedUsage(
        occupancy_id=occ.occupancy_id,
        job_uid=occ.job_uid,
        workspace=occ.workspace,
        quota=occ.quota,
        user=occ.user,
        flavor=occ.flavor,
        resource=line.resource,
        billing_mode=line.billing_mode,
        usage_period=line.period,
        unit=line.unit,
        usage=delta.usage,
        quantity=delta.quantity,
        as_of=delta.as_of,
        rate=delta.rate_value,
    )
    kind = "final" if delta.final else "accrual"
    at_rate = f" at {delta.rate}" if delta.rate else ""
    return balanced_transaction(
        transaction_id(
            occ.occupancy_id, line.period, line.resource, line.billing_mode,
            step or delta.step, delta.rate,
        ),
        postings,
        cause_event_ids=cause_event_ids,
        period=period or line.period,
        memo=f"{kind} {line.billing_mode} {line.resource}{at_rate} {line.period} "
        f"job {occ.job_uid} occupancy {occ.occupancy_id} to {step or delta.step}",
        usage=usage,
    )  # fmt: skip


def transactions_from_deltas(
    deltas: Iterable[LineDelta],
    *,
    cause_event_ids: Sequence[str] = (),
    period: str | None = None,
) -> tuple[LedgerTransactionPosted, ...]:
    """One transaction per delta, in the deltas' (deterministic) order."""
    return tuple(
        transaction_from_delta(d, cause_event_ids=cause_event_ids, period=period) for d in deltas
    )


def rounding_transaction_id(invoice_id: str) -> str:
    """Deterministic id of the transaction posting an invoice's rounding."""
    return str(deterministic_id("txn-rounding", invoice_id))


def rounding_transaction(
    invoice_id: str,
    workspace: str,
    period: str,
    currency: str,
    rounding: Decimal,
    *,
    cause_event_ids: Sequence[str] = (),
) -> LedgerTransactionPosted:
    """Post an invoice's rounding (total minus the precise sum of its lines, minor units).

    Debits ``receivable/<workspace>`` (negative when the lines rounded down) and
    credits :data:`ROUNDING_ACCOUNT`, in the invoice's period, so what the period
    owes in the ledger equals the invoice total exactly.
    """
    return balanced_transaction(
        rounding_transaction_id(invoice_id),
        [
            Posting(
                account=receivable_account(workspace), amount_minor=rounding, currency=currency
            ),
            Posting(account=ROUNDING_ACCOUNT, amount_minor=-rounding, currency=currency),
        ],
        cause_event_ids=cause_event_ids,
        period=period,
        memo=f"rounding of invoice {invoice_id} ({workspace} {period})",
    )


def reversal_id(original_id: str) -> str:
    """Deterministic id of the reversal of ``original_id`` (a transaction is reversed once)."""
    return str(deterministic_id("txn-reversal", original_id))


def reversal(
    original: LedgerTransactionPosted,
    *,
    memo: str = "",
    period: str | None = None,
    cause_event_ids: Sequence[str] = (),
) -> LedgerTransactionPosted:
    """A new transaction that negates ``original`` and links to it through ``reverses``."""
    usage = original.usage
    if usage is not None:
        usage = usage.model_copy(update={"usage": -usage.usage, "quantity": -usage.quantity})
    return balanced_transaction(
        reversal_id(original.transaction_id),
        [p.model_copy(update={"amount_minor": -p.amount_minor}) for p in original.postings],
        cause_event_ids=tuple(cause_event_ids) or original.cause_event_ids,
        period=period or original.period,
        memo=memo or f"reversal of {original.transaction_id}",
        reverses=original.transaction_id,
        usage=usage,
    )


#: The ``source`` of every posting the billing rater (and the period close) appends.
RATER_SOURCE = "billing-rater"


def transaction_envelope(
    txn: LedgerTransactionPosted, at: datetime, *, source: str = RATER_SOURCE
) -> Envelope:
    """The event carrying ``txn``: stream ``account/receivable/<workspace>`` (or its first
    posting's account when it has no usage), event id derived from the transaction id, so a
    transaction posted twice is one event.

    A transaction moved out of a locked period (``service_period``: :mod:`ledger.periods`)
    occurs no earlier than just after its open period begins: a closed month's trial
    balance and journal (both by ``occurred_at``) never change after its close."""
    if txn.service_period is not None and txn.period is not None:
        year, month = (int(part) for part in txn.period.split("-"))
        opens = datetime(year, month, 1, tzinfo=UTC) + timedelta(microseconds=1)
        at = max(at, opens)
    workspace = txn.usage.workspace if txn.usage is not None else None
    account = receivable_account(workspace) if workspace else txn.postings[0].account
    return make_envelope(
        txn,
        event_id=deterministic_id("event", "LedgerTransactionPosted", txn.transaction_id),
        stream=f"account/{account}",
        occurred_at=at,
        observed_at=at,
        source=source,
    )
