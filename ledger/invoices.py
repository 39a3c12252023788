"""Invoices: what a workspace owes for a period, built from posted transactions only.

An invoice is derived from the ledger, never from a second rating run, so it
cannot disagree with the books: each line sums the receivable postings (and the
exact usage) of the rating transactions of one job x resource x billing mode in
the period, and the total is the sum of the lines, exactly (integers). Rounding
happened once per rated line item before posting; nothing is rounded here except
the displayed quantity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal

from ledger.accounts import receivable_account
from ledger.events import BillingMode, InvoiceIssued, InvoiceLine, LedgerTransactionPosted
from ledger.ids import deterministic_id
from ledger.money import exact_context, to_decimal
from ledger.rating import usage_quantity

__all__ = [
    "QUANTITY_QUANTUM",
    "NotInvoiceable",
    "build_invoice",
    "invoice_id",
]

#: Displayed quantities (GPU-hours, ...) are rounded half-even to this quantum; the
#: exact usage stays in the transactions. Amounts are never derived from it.
QUANTITY_QUANTUM = Decimal("0.000001")


class NotInvoiceable(ValueError):
    """A transaction in the invoice's scope that carries no usage (or mixes currencies)."""


def invoice_id(workspace: str, period: str, revision: int = 0) -> str:
    """Deterministic invoice id; ``revision`` counts re-issues after a void."""
    return str(deterministic_id("invoice", workspace, period, str(revision)))


@dataclass
class _Acc:
    unit: str
    usage: int = 0
    amount_minor: int = 0
    transaction_ids: list[str] = field(default_factory=list)


def build_invoice(
    workspace: str,
    period: str,
    transactions: Iterable[LedgerTransactionPosted],
    issued_at: datetime,
    *,
    currency: str | None = None,
    revision: int = 0,
) -> InvoiceIssued:
    """The ``InvoiceIssued`` payload for ``workspace`` x ``period``.

    ``transactions`` may hold anything posted; those posted to ``period`` that
    touch ``receivable/<workspace>`` are invoiced (reversals included, so a
    reversed charge nets out). One line per job x resource x billing mode, in
    sorted order; lines that net to zero usage and zero amount are left out.
    ``currency`` is required only when there may be no transactions at all.
    """
    account = receivable_account(workspace)
    groups: dict[tuple[str, str, BillingMode], _Acc] = {}
    for txn in transactions:
        if txn.period != period:
            continue
        mine = [p for p in txn.postings if p.account == account]
        if not mine:
            continue
        if txn.usage is None or txn.usage.workspace != workspace:
            raise NotInvoiceable(
                f"transaction {txn.transaction_id} posts to {account} without usage of "
                f"{workspace}: adjustments belong on a credit note, not in build_invoice"
            )
        for p in mine:
            if currency is None:
                currency = p.currency
            elif p.currency != currency:
                raise NotInvoiceable(
                    f"transaction {txn.transaction_id} is in {p.currency}, invoice in {currency}"
                )
        u = txn.usage
        acc = groups.setdefault((u.job_uid, u.resource, u.billing_mode), _Acc(unit=u.unit))
        acc.usage += u.usage
        acc.amount_minor += sum(p.amount_minor for p in mine)
        acc.transaction_ids.append(txn.transaction_id)
    if currency is None:
        raise NotInvoiceable(f"no transactions for {workspace} {period}: pass the currency")
    lines = []
    for (job_uid, resource, mode), acc in sorted(groups.items()):
        if acc.usage == 0 and acc.amount_minor == 0:
            continue
        with exact_context():
            quantity = to_decimal(usage_quantity(resource, acc.usage)).quantize(
                QUANTITY_QUANTUM, rounding=ROUND_HALF_EVEN
            )
        lines.append(
            InvoiceLine(
                description=f"job {job_uid}: {resource} ({mode}), {quantity} {acc.unit}",
                workspace=workspace,
                resource=resource,
                billing_mode=mode,
                job_uid=job_uid,
                quantity=quantity,
                unit=acc.unit,
                amount_minor=acc.amount_minor,
                transaction_ids=tuple(sorted(acc.transaction_ids)),
            )
        )
    return InvoiceIssued(
        invoice_id=invoice_id(workspace, period, revision),
        workspace=workspace,
        period=period,
        currency=currency,
        lines=tuple(lines),
        total_minor=sum(line.amount_minor for line in lines),
        issued_at=issued_at,
    )
