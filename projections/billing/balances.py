"""The books as an accountant reads them: the trial balance and the receivables by age.

Every posting the ledger holds (rating, rounding, reversals, credit notes) is summed per
account and currency, debits (positive) apart from credits (negative). The ledger only
ever posts balanced transactions (:func:`ledger.accounts.check_balanced`), so in every
currency the debits equal the credits, at full precision; a trial balance that does not
is a bug the report says out loud (``balanced``). ``at`` (cluster time) counts the
transactions that occurred by then. Amounts are decimal strings in the currency, at the
postings' full precision (rating posts below the minor unit; invoices round once).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, text

from ledger.money import plain_decimal
from projections.billing.reads import ScaleOf
from projections.billing.reports import cluster_clock

__all__ = [
    "AGE_BUCKETS",
    "Books",
    "TrialBalance",
    "read_books",
    "receivables_by_age",
    "trial_balance",
]

#: Receivable age buckets, in days since the period a posting belongs to ended: (label, from, to).
AGE_BUCKETS = (("0-30", 0, 30), ("31-60", 31, 60), ("61-90", 61, 90), ("over-90", 91, None))


def _amount(minor: Any, scale: int) -> str:
    return plain_decimal(Decimal(minor).scaleb(-scale))


@dataclass(frozen=True)
class TrialBalance:
    rows: list[dict[str, Any]]  # account, currency, debit, credit, balance
    totals: list[dict[str, Any]]  # per currency: debit, credit, and whether they agree

    @property
    def balanced(self) -> bool:
        return all(t["balanced"] for t in self.totals)


def trial_balance(
    conn: Connection, scale_of: ScaleOf, *, at: datetime | None = None
) -> TrialBalance:
    """Every account's debits, credits and balance (postings that occurred by ``at``)."""
    found = conn.execute(
        text(
            "SELECT p.account, p.currency, "
            "COALESCE(sum(p.amount_minor) FILTER (WHERE p.amount_minor > 0), 0) AS debit, "
            "COALESCE(-sum(p.amount_minor) FILTER (WHERE p.amount_minor < 0), 0) AS credit, "
            "sum(p.amount_minor) AS balance "
            "FROM billing_postings p JOIN billing_transactions t USING (transaction_id) "
            "WHERE CAST(:at AS timestamptz) IS NULL OR t.occurred_at <= :at "
            "GROUP BY p.account, p.currency ORDER BY p.currency, p.account"
        ),
        {"at": at},
    ).all()
    rows: list[dict[str, Any]] = []
    sums: dict[str, list[Decimal]] = {}
    for account, currency, debit, credit, balance in found:
        scale = scale_of(currency)
        rows.append(
            {
                "account": account,
                "currency": currency,
                "debit": _amount(debit, scale),
                "credit": _amount(credit, scale),
                "balance": _amount(balance, scale),
            }
        )
        total = sums.setdefault(currency, [Decimal(0), Decimal(0)])
        total[0] += Decimal(debit)
        total[1] += Decimal(credit)
    totals = [
        {
            "currency": currency,
            "debit": _amount(debit, scale_of(currency)),
            "credit": _amount(credit, scale_of(currency)),
            "balanced": debit == credit,
        }
        for currency, (debit, credit) in sorted(sums.items())
    ]
    return TrialBalance(rows, totals)


#: When a posting's amount falls due: the end of its billing period (the month it was posted
#: to, UTC; an invoice closes it), or, without a period (a credit note), when it occurred.
_DUE_FROM = (
    "COALESCE(CAST(to_date(t.period || '-01', 'YYYY-MM-DD') + interval '1 month' "
    "AS timestamp) AT TIME ZONE 'UTC', t.occurred_at)"
)


#: An invoiced period's issued invoice (issued by ``:at``): its postings are aged as the invoice.
_INVOICED = (
    "EXISTS (SELECT 1 FROM billing_invoices i WHERE i.status = 'issued' "
    "AND i.workspace = substr(p.account, length('receivable/') + 1) AND i.period = t.period "
    "AND i.issued_at <= :at)"
)

#: Each issued invoice's open amount at ``:at``: its total less what its period had
#: credited, paid (the applied part) and had applied from credit balances by then, plus
#: what it had returned to the credit balance (settled beyond its total) by then.
_INVOICE_OPEN = """
SELECT i.workspace, i.currency, i.period,
  i.total_minor
  - COALESCE((SELECT sum(c.amount_minor) FROM billing_credit_notes c
      JOIN billing_invoices j ON j.invoice_id = c.invoice_id
      WHERE j.workspace = i.workspace AND j.period = i.period AND c.recorded_at <= :at), 0)
  - COALESCE((SELECT sum(pm.applied_minor) FROM billing_payments pm
      JOIN billing_invoices j ON j.invoice_id = pm.invoice_id
      WHERE j.workspace = i.workspace AND j.period = i.period AND pm.received_at <= :at), 0)
  - COALESCE((SELECT sum(a.amount_minor) FROM billing_credit_applications a
      JOIN billing_invoices j ON j.invoice_id = a.invoice_id
      WHERE j.workspace = i.workspace AND j.period = i.period AND a.occurred_at <= :at), 0)
  + COALESCE((SELECT sum(r.amount_minor) FROM billing_credit_returns r
      JOIN billing_invoices j ON j.invoice_id = r.invoice_id
      WHERE j.workspace = i.workspace AND j.period = i.period AND r.occurred_at <= :at), 0)
FROM billing_invoices i WHERE i.status = 'issued' AND i.issued_at <= :at
"""


def _bucket(days: int) -> str:
    for label, start, to in AGE_BUCKETS:
        if days >= start and (to is None or days <= to):
            return label
    return AGE_BUCKETS[0][0]


def receivables_by_age(conn: Connection, scale_of: ScaleOf, at: datetime) -> list[dict[str, Any]]:
    """What each workspace owes at ``at`` (its ``receivable/<workspace>`` balance), aged by
    what is still open: each issued invoice's open amount (its total less credit notes,
    payments and credit applied by ``at``) by days since the end of its period
    (:data:`AGE_BUCKETS`); what no invoice holds yet (usage of a period not invoiced) in
    ``open`` while its period has not ended, then by days since it ended, as accounts
    receivable are aged from their invoices. A paid invoice ages nothing."""
    age = f"(CAST(:at AS timestamptz) - {_DUE_FROM})"
    buckets = [f"COALESCE(sum(p.amount_minor) FILTER (WHERE {_DUE_FROM} > :at), 0)"]
    for _, start, to in AGE_BUCKETS:
        upper = "" if to is None else f" AND {age} < make_interval(days => {to + 1})"
        buckets.append(
            f"COALESCE(sum(p.amount_minor) FILTER (WHERE {_DUE_FROM} <= :at "
            f"AND {age} >= make_interval(days => {start}){upper}), 0)"
        )
    labels = ["open", *(label for label, _, _ in AGE_BUCKETS)]
    figures: dict[tuple[str, str], dict[str, Decimal]] = {}
    # what the receivable holds in all (the total), and of it what no invoice holds yet
    for workspace, currency, total in conn.execute(
        text(
            "SELECT substr(p.account, length('receivable/') + 1), p.currency, "
            "sum(p.amount_minor) FROM billing_postings p "
            "JOIN billing_transactions t USING (transaction_id) "
            "WHERE p.account LIKE 'receivable/%' AND t.occurred_at <= :at GROUP BY 1, 2"
        ),
        {"at": at},
    ).all():
        row = figures.setdefault((workspace, currency), dict.fromkeys(labels, Decimal(0)))
        row["total"] = Decimal(total)
    for workspace, currency, *amounts in conn.execute(
        text(
            f"SELECT substr(p.account, length('receivable/') + 1) AS workspace, p.currency, "
            f"{', '.join(buckets)} "
            "FROM billing_postings p JOIN billing_transactions t USING (transaction_id) "
            "WHERE p.account LIKE 'receivable/%' AND t.occurred_at <= :at "
            f"AND t.period IS NOT NULL AND NOT {_INVOICED} GROUP BY 1, 2"
        ),
        {"at": at},
    ).all():
        row = figures.setdefault((workspace, currency), dict.fromkeys(labels, Decimal(0)))
        for label, amount in zip(labels, amounts, strict=True):
            row[label] += Decimal(amount)
    for workspace, currency, period, open_minor in conn.execute(
        text(_INVOICE_OPEN), {"at": at}
    ).all():
        row = figures.setdefault((workspace, currency), dict.fromkeys(labels, Decimal(0)))
        ended = datetime.fromisoformat(f"{period}-01T00:00:00+00:00")
        ended = ended.replace(year=ended.year + ended.month // 12, month=ended.month % 12 + 1)
        row[_bucket((at - ended).days)] += Decimal(open_minor)
    out = []
    for (workspace, currency), row in sorted(figures.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        total = row.pop("total", Decimal(0))
        # what neither an invoice nor a period holds (a credit note of a voided period not
        # re-issued yet): not invoiced, so with ``open``
        row["open"] += total - sum(row.values(), Decimal(0))
        scale = scale_of(currency)
        item: dict[str, Any] = {"workspace": workspace, "currency": currency}
        for label in labels:
            item[label] = _amount(row[label], scale)
        item["total"] = _amount(total, scale)
        out.append(item)
    return out


@dataclass(frozen=True)
class Books:
    """The trial balance, and the receivables aged at ``aged_at`` (None: nothing posted)."""

    balance: TrialBalance
    aged_at: datetime | None
    receivables: list[dict[str, Any]]


def read_books(conn: Connection, scale_of: ScaleOf, at: datetime | None = None) -> Books:
    """What ``ledger balance`` and ``GET /v1/ledger/balance`` show: the trial balance of
    the postings that occurred by ``at``, and the receivables aged at ``at`` (default: the
    cluster clock)."""
    aged_at = at or cluster_clock(conn)
    receivables = [] if aged_at is None else receivables_by_age(conn, scale_of, aged_at)
    return Books(trial_balance(conn, scale_of, at=at), aged_at, receivables)
