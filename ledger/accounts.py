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

from ledger.events import BillingMode, LedgerTransactionPosted, Posting, RatedUsage
from ledger.ids import deterministic_id
from ledger.rating import LineDelta

__all__ = [
    "RECEIVABLE",
    "REVENUE",
    "UnbalancedTransaction",
    "balanced_transaction",
    "balances",
    "check_balanced",
    "receivable_account",
    "revenue_account",
    "reversal",
    "reversal_id",
    "transaction_from_delta",
    "transaction_id",
    "transactions_from_deltas",
]

RECEIVABLE = "receivable"
REVENUE = "revenue"


class UnbalancedTransaction(ValueError):
    """A transaction whose postings do not sum to zero in some currency."""


def receivable_account(workspace: str) -> str:
    """What a workspace owes: ``receivable/<workspace>``."""
    if not workspace:
        raise ValueError("workspace must not be empty")
    return f"{RECEIVABLE}/{workspace}"


def revenue_account(billing_mode: BillingMode, resource: str) -> str:
    """Revenue per line: ``revenue/<billing_mode>/<resource>`` (e.g. ``revenue/spot/gpu/any``)."""
    if not resource:
        raise ValueError("resource must not be empty")
    return f"{REVENUE}/{billing_mode}/{resource}"


def balances(postings: Iterable[Posting]) -> dict[str, int]:
    """Sum of posting amounts per currency."""
    out: dict[str, int] = {}
    for p in postings:
        out[p.currency] = out.get(p.currency, 0) + p.amount_minor
    return out


def check_balanced(postings: Sequence[Posting]) -> None:
    """Raise :class:`UnbalancedTransaction` unless every currency sums to zero."""
    if not postings:
        raise UnbalancedTransaction("a transaction needs at least one posting")
    off = {c: s for c, s in balances(postings).items() if s != 0}
    if off:
        detail = ", ".join(f"{c} {s:+d}" for c, s in sorted(off.items()))
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
    )


def transaction_id(
    occupancy_id: str, period: str, resource: str, billing_mode: BillingMode, step: str
) -> str:
    """Deterministic id of the rating transaction for one line key at one cumulative step."""
    return str(deterministic_id("txn", occupancy_id, period, resource, billing_mode, step))


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
    amount = delta.amount_minor
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
    )
    kind = "final" if delta.final else "accrual"
    return balanced_transaction(
        transaction_id(
            occ.occupancy_id, line.period, line.resource, line.billing_mode, step or delta.step
        ),
        postings,
        cause_event_ids=cause_event_ids,
        period=period or line.period,
        memo=f"{kind} {line.billing_mode} {line.resource} {line.period} "
        f"job {occ.job_uid} occupancy {occ.occupancy_id} to {step or delta.step}",
        usage=usage,
    )


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
