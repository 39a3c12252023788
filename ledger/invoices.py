"""Invoices: what a workspace owes for a period, built from posted transactions only.

An invoice is derived from the ledger, never from a second rating run, so it
cannot disagree with the books. The rating postings carry amounts below the
minor unit; an invoice line aggregates the period's usage of one resource (GPU
flavor, cpu, memory) x billing mode x rate, over all jobs, and is the one place
money is rounded: half-even, once, from the line's precise sum. The lines'
rounding is posted to ``revenue/rounding`` (``ledger.accounts.rounding_transaction``)
so the period's receivable equals the invoice total, and the total is the sum of
the lines exactly. So a workspace's invoice differs from exact usage x rate by at
most half a minor unit per line, however many small jobs it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal

from ledger.accounts import receivable_account, rounding_transaction, rounding_transaction_id
from ledger.errors import Invalid
from ledger.events import (
    BillingMode,
    InvoiceIssued,
    InvoiceLine,
    LedgerTransactionPosted,
    Posting,
    SubscriptionCharge,
)
from ledger.ids import deterministic_id
from ledger.money import (
    exact_context,
    precise_decimal,
    precise_from_decimal,
    round_precise,
    to_decimal,
)
from ledger.rating import rate_key, usage_quantity

__all__ = [
    "QUANTITY_QUANTUM",
    "NotInvoiceable",
    "build_invoice",
    "invoice_id",
    "invoice_rounding",
]

#: Displayed quantities (GPU-hours, ...) are rounded half-even to this quantum; the
#: exact usage stays in the transactions. Amounts are never derived from it.
QUANTITY_QUANTUM = Decimal("0.000001")


class NotInvoiceable(Invalid):
    """A transaction in the invoice's scope that carries no usage (or mixes currencies)."""


def invoice_id(workspace: str, period: str, revision: int = 0) -> str:
    """Deterministic invoice id; ``revision`` counts re-issues after a void."""
    return str(deterministic_id("invoice", workspace, period, str(revision)))


@dataclass
class _Acc:
    unit: str
    rate: Decimal | None
    usage: int = 0
    precise: int = 0
    transaction_ids: list[str] = field(default_factory=list)


def build_invoice(
    workspace: str,
    period: str,
    transactions: Iterable[LedgerTransactionPosted],
    issued_at: datetime,
    *,
    currency: str | None = None,
    revision: int = 0,
    workloads: Mapping[str, str] | None = None,
) -> InvoiceIssued:
    """The ``InvoiceIssued`` payload for ``workspace`` x ``period``.

    ``transactions`` may hold anything posted; those posted to ``period`` that
    touch ``receivable/<workspace>`` with usage are invoiced (reversals included,
    so a reversed charge nets out). A transaction dated into a locked period and booked
    into this one (``service_period``: :mod:`ledger.periods`) gets a line of its own, an
    adjustment naming that period (and, for a subscription's charge, its dates). One
    line per resource x billing mode x rate, in
    sorted order, its amount rounded once from its precise sum; lines that net to
    zero usage and zero amount are left out. ``currency`` is required only when
    there may be no transactions at all. When the lines' rounding is not zero,
    ``rounding_transaction_id`` names the transaction that must be posted with the
    invoice (:func:`invoice_rounding`).

    ``workloads`` names the services and notebooks among the transactions' jobs (job uid
    -> ``service ns/name``): each one's usage gets lines of its own, naming it, so a
    service's prepaid baseline and its pay-as-you-go spill stand apart on the invoice.
    """
    account = receivable_account(workspace)
    workloads = workloads or {}
    # resource x mode x rate, the workload's uid ("": the jobs of the workspace), and the
    # locked period a late adjustment belongs to ("": this one)
    groups: dict[tuple[str, BillingMode, str, str, str], _Acc] = {}
    charges: list[InvoiceLine] = []
    for txn in transactions:
        if txn.period != period:
            continue
        mine = [p for p in txn.postings if p.account == account]
        if not mine:
            continue
        if txn.charge is not None and txn.charge.workspace == workspace:
            currency = _one_currency(txn, mine, currency)
            charges.append(_charge_line(txn, txn.charge, mine, currency))
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
        rate = "" if u.rate is None else rate_key(u.rate)
        uid = u.job_uid if u.job_uid in workloads else ""
        late = txn.service_period or ""
        acc = groups.setdefault((u.resource, u.billing_mode, rate, uid, late), _Acc(u.unit, u.rate))
        acc.usage += u.usage
        acc.precise += sum(precise_from_decimal(p.amount_minor) for p in mine)
        acc.transaction_ids.append(txn.transaction_id)
    if currency is None:
        raise NotInvoiceable(f"no transactions for {workspace} {period}: pass the currency")
    lines = []
    for (resource, mode, rate, uid, late), acc in sorted(groups.items()):
        if acc.usage == 0 and acc.precise == 0:
            continue
        with exact_context():
            quantity = to_decimal(usage_quantity(resource, acc.usage)).quantize(
                QUANTITY_QUANTUM, rounding=ROUND_HALF_EVEN
            )
        at = f" at {rate} {currency}/{acc.unit}" if rate else ""
        whose = f", {workloads[uid]}" if uid else ""
        adjusts = f"adjustment for locked period {late}: usage of {late}, " if late else ""
        lines.append(
            InvoiceLine(
                description=f"{adjusts}{resource} ({mode}){whose}: {quantity} {acc.unit}{at}",
                workspace=workspace,
                job_uid=uid or None,
                resource=resource,
                billing_mode=mode,
                quantity=quantity,
                unit=acc.unit,
                amount_minor=round_precise(acc.precise),
                transaction_ids=tuple(sorted(acc.transaction_ids)),
                rate=acc.rate,
                amount_precise=precise_decimal(acc.precise),
            )
        )
    lines.extend(sorted(charges, key=lambda line: (line.description, line.transaction_ids)))
    the_id = invoice_id(workspace, period, revision)
    total = sum(line.amount_minor for line in lines)
    precise_total = sum(_precise(line) for line in lines)
    return InvoiceIssued(
        invoice_id=the_id,
        workspace=workspace,
        period=period,
        currency=currency,
        lines=tuple(lines),
        total_minor=total,
        issued_at=issued_at,
        rounding_transaction_id=(
            rounding_transaction_id(the_id)
            if precise_from_decimal(total) != precise_total
            else None
        ),
    )


def _one_currency(
    txn: LedgerTransactionPosted, postings: list[Posting], currency: str | None
) -> str:
    for p in postings:
        if currency is None:
            currency = p.currency
        elif p.currency != currency:
            raise NotInvoiceable(
                f"transaction {txn.transaction_id} is in {p.currency}, invoice in {currency}"
            )
    assert currency is not None
    return currency


def _charge_line(
    txn: LedgerTransactionPosted,
    charge: SubscriptionCharge,
    postings: list[Posting],
    currency: str,
) -> InvoiceLine:
    """A subscription term ordered (or refunded): one line, already in whole minor units."""
    precise = sum(precise_from_decimal(p.amount_minor) for p in postings)
    # dated into a locked period, booked into this one: the line says so, with its dates
    adjusts = f"adjustment for locked period {txn.service_period}: " if txn.service_period else ""
    if charge.kind == "sla-credit":
        line = _sla_credit_line(txn, charge, precise, currency)
        return line.model_copy(update={"description": adjusts + line.description})
    unit = f"node-{charge.unit}"
    span = f"{charge.starts_at:%Y-%m-%d} to {charge.ends_at:%Y-%m-%d}"
    what = {
        "purchase": "subscription",
        "renewal": "renewal",
        "refund": "refund of",
        "add-nodes": "nodes added to",
    }[charge.kind]
    # nodes added mid-term are charged by started day: the line says how many of the term's
    prorated = f", {charge.detail}" if charge.kind == "add-nodes" and charge.detail else ""
    return InvoiceLine(
        description=(
            f"{adjusts}{what} {charge.subscription_id} term {charge.term}: {charge.nodes} x "
            f"{charge.spec} in {charge.group}, {span}, at {rate_key(charge.unit_price)} "
            f"{currency}/{unit}{prorated}"
        ),
        workspace=charge.workspace,
        resource=f"subscription/{charge.spec}",
        billing_mode="quota",
        quantity=Decimal(charge.nodes if charge.kind != "refund" else -charge.nodes),
        unit=unit,
        amount_minor=round_precise(precise),
        transaction_ids=(txn.transaction_id,),
        rate=charge.unit_price,
        amount_precise=precise_decimal(precise),
    )


def _sla_credit_line(
    txn: LedgerTransactionPosted, charge: SubscriptionCharge, precise: int, currency: str
) -> InvoiceLine:
    """An SLA credit (docs/subscriptions.md, "SLA credits"): negative undelivered
    node-hours at the term's node-hour price, whole minor units already."""
    hours = charge.node_hours if charge.node_hours is not None else Decimal(0)
    span = f"{charge.starts_at:%Y-%m-%d} to {charge.ends_at:%Y-%m-%d}"
    return InvoiceLine(
        description=(
            f"SLA credit for {charge.subscription_id} term {charge.term}: "
            f"{hours.quantize(Decimal('0.01'))} node-hours "
            f"of {charge.spec} in {charge.group} not delivered, {span}, at "
            f"{rate_key(charge.unit_price)} {currency}/node-{charge.unit} pro rata"
            + (f" ({charge.detail})" if charge.detail else "")
        ),
        workspace=charge.workspace,
        resource=f"subscription/{charge.spec}",
        billing_mode="quota",
        quantity=-hours,
        unit="node-hour",
        amount_minor=round_precise(precise),
        transaction_ids=(txn.transaction_id,),
        amount_precise=precise_decimal(precise),
    )


def _precise(line: InvoiceLine) -> int:
    amount = line.amount_precise if line.amount_precise is not None else line.amount_minor
    return precise_from_decimal(amount)


def invoice_rounding(
    invoice: InvoiceIssued, *, cause_event_ids: Iterable[str] = ()
) -> LedgerTransactionPosted | None:
    """The transaction posting ``invoice``'s rounding (None when the lines rounded to nothing)."""
    if invoice.rounding_transaction_id is None:
        return None
    rounding = precise_from_decimal(invoice.total_minor) - sum(
        _precise(line) for line in invoice.lines
    )
    txn = rounding_transaction(
        invoice.invoice_id, invoice.workspace, invoice.period, invoice.currency,
        precise_decimal(rounding), cause_event_ids=tuple(cause_event_ids),
    )  # fmt: skip
    assert txn.transaction_id == invoice.rounding_transaction_id
    return txn
