"""The journal of a month as a general ledger imports it: one line per posting.

``dlc-ledger ledger export`` and ``GET /v1/ledger/export`` read it. What a period holds, and
why (docs/finance.md, "Journal export"):

- **The period's postings** are those of the transactions that *occurred* in it, in the
  trial balance's sense (:func:`projections.billing.balances.trial_balance` counts a
  transaction ``at`` T when it occurred by T): month P holds what occurred after the
  instant P began and by the instant it ended, ``(start, end]``. A rating "to
  2027-11-01T00:00" or a day's recognition ending then closes October, so it is October's.
  The export of P therefore equals the trial balance at P's end minus the trial balance at
  P's start, account by account, exactly (the ``amount_precise`` column).
  A line's ``date`` is the UTC day its instant closes (an instant at midnight closes the day
  before), so every date of P's export is in P. A transaction's billing period
  (``billing_period``, the invoice it belongs to) can be another month: a late adjustment,
  an invoice's rounding booked when the invoice is issued; a column, not the booking period.
- **Precision.** Postings are sub-minor; ``debit`` / ``credit`` are whole minor units at the
  currency's scale, rounded with a carry per account and balanced per transaction
  (:func:`ledger.journal.minor_lines`); ``amount_precise`` keeps the posting as booked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, text

from ledger.accounts import rounding_transaction_id
from ledger.errors import Invalid
from ledger.ids import deterministic_id
from ledger.journal import JournalLeg, minor_lines
from ledger.money import from_minor, plain_decimal, precise_from_decimal
from projections.billing.reads import ScaleOf

__all__ = ["JOURNAL_COLUMNS", "Journal", "period_bounds", "read_journal"]

#: The columns of a journal line, in order (CSV header, JSON keys).
JOURNAL_COLUMNS = (
    "date",
    "journal_id",
    "line",
    "account",
    "debit",
    "credit",
    "currency",
    "memo",
    "amount_precise",
    "occurred_at",
    "billing_period",
    "workspace",
    "invoice_id",
    "credit_note_id",
    "subscription_id",
    "occupancy_id",
    "job_uid",
    "usage_period",
    "reverses",
    "cause_event_ids",
)

_DEFERRED = "deferred/subscription/"
_RECEIVABLE = "receivable/"


def period_bounds(period: str) -> tuple[datetime, datetime]:
    """The instants month ``period`` (``YYYY-MM``, UTC) begins and ends."""
    year, month = (int(part) for part in period.split("-"))
    if not (1 <= year <= 9998 and 1 <= month <= 12):  # an instant's years: 1 to 9999
        raise Invalid(f"period {period!r} is out of range: 0001-01 to 9998-12")
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


@dataclass(frozen=True)
class Journal:
    period: str
    lines: list[dict[str, Any]]
    # per currency: debit and credit totals (whole minor units, as strings) and balanced
    totals: list[dict[str, Any]]
    # per account and currency: the lines' debit, credit and the precise movement
    accounts: list[dict[str, Any]]


def _money(minor: int, scale: int) -> str:
    return f"{from_minor(minor, scale):f}"


def _precise_major(amount: Decimal, scale: int) -> str:
    return plain_decimal(amount.scaleb(-scale))


def _opening(conn: Connection, start: datetime) -> dict[tuple[str, str], int]:
    found = conn.execute(
        text(
            "SELECT p.account, p.currency, sum(p.amount_minor) "
            "FROM billing_postings p JOIN billing_transactions t USING (transaction_id) "
            "WHERE t.occurred_at <= :start GROUP BY 1, 2"
        ),
        {"start": start},
    ).all()
    return {(a, c): precise_from_decimal(amount) for a, c, amount in found}


def _invoices(conn: Connection) -> tuple[dict[tuple[str, str], str], dict[str, str]]:
    """The invoice of each (workspace, period) (the issued one, else the latest voided
    revision) and the invoice of each rounding transaction."""
    by_period: dict[tuple[str, str], str] = {}
    rounding: dict[str, str] = {}
    for invoice_id, workspace, period in conn.execute(
        text(
            "SELECT invoice_id, workspace, period FROM billing_invoices "
            "ORDER BY (status = 'issued'), position"
        )
    ):
        by_period[(workspace, period)] = invoice_id  # the issued one last, so it wins
        rounding[rounding_transaction_id(invoice_id)] = invoice_id
    return by_period, rounding


def _credit_notes(conn: Connection) -> dict[str, tuple[str, str]]:
    """Each credit note's transaction id -> (credit note, invoice)."""
    return {
        str(deterministic_id("txn-credit-note", note)): (note, invoice)
        for note, invoice in conn.execute(
            text("SELECT credit_note_id, invoice_id FROM billing_credit_notes")
        )
    }


def _references(
    row: Mapping[str, Any],
    accounts: list[str],
    invoices: tuple[dict[tuple[str, str], str], dict[str, str]],
    notes: Mapping[str, tuple[str, str]],
) -> dict[str, Any]:
    """What a transaction points back to: its invoice, credit note, subscription."""
    txn_id, data = row["transaction_id"], row["data"]
    by_period, rounding = invoices
    workspace = row["workspace"] or next(
        (a.removeprefix(_RECEIVABLE) for a in accounts if a.startswith(_RECEIVABLE)), None
    )
    note, invoice = notes.get(txn_id, (None, None))
    original = row["reverses"]
    if invoice is None:
        invoice = rounding.get(txn_id) or (original and rounding.get(original))
    if (
        invoice is None
        and workspace
        and row["period"]
        and any(a.startswith(_RECEIVABLE) for a in accounts)
    ):
        invoice = by_period.get((workspace, row["period"]))
    charge = data.get("charge") or {}
    subscription = charge.get("subscription_id") or next(
        (a.removeprefix(_DEFERRED) for a in accounts if a.startswith(_DEFERRED)), None
    )
    return {
        "workspace": workspace,
        "invoice_id": invoice or None,
        "credit_note_id": note,
        "subscription_id": subscription,
    }


def read_journal(conn: Connection, scale_of: ScaleOf, period: str) -> Journal:
    """Month ``period``'s journal lines, totals per currency, movements per account."""
    start, end = period_bounds(period)
    found = conn.execute(
        text(
            "SELECT t.transaction_id, t.occurred_at, t.period, t.memo, t.reverses, "
            "t.cause_event_ids, t.workspace, t.occupancy_id, t.job_uid, t.usage_period, "
            "t.data, p.seq, p.account, p.currency, p.amount_minor "
            "FROM billing_transactions t JOIN billing_postings p USING (transaction_id) "
            "WHERE t.occurred_at > :start AND t.occurred_at <= :end "
            "ORDER BY t.occurred_at, t.position, t.transaction_id, p.seq"
        ),
        {"start": start, "end": end},
    ).mappings()
    txns: list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for row in map(dict, found):
        if not txns or txns[-1][0]["transaction_id"] != row["transaction_id"]:
            txns.append((row, []))
        txns[-1][1].append(row)
    legs = [
        [JournalLeg(p["account"], p["currency"], precise_from_decimal(p["amount_minor"]))
         for p in postings]
        for _, postings in txns
    ]  # fmt: skip
    whole = minor_lines(legs, _opening(conn, start))
    invoices, notes = _invoices(conn), _credit_notes(conn)
    lines: list[dict[str, Any]] = []
    sums: dict[str, list[int]] = {}
    per_account: dict[tuple[str, str], list[Any]] = {}
    for (head, postings), amounts in zip(txns, whole, strict=True):
        refs = _references(head, [p["account"] for p in postings], invoices, notes)
        occurred: datetime = head["occurred_at"].astimezone(UTC)
        day = (occurred - timedelta(microseconds=1)).date().isoformat()
        for n, (p, minor) in enumerate(zip(postings, amounts, strict=True), start=1):
            currency, scale = p["currency"], scale_of(p["currency"])
            precise = Decimal(p["amount_minor"])
            debit_side = minor > 0 or (minor == 0 and precise >= 0)
            lines.append(
                {
                    "date": day,
                    "journal_id": head["transaction_id"],
                    "line": n,
                    "account": p["account"],
                    "debit": _money(minor, scale) if debit_side else None,
                    "credit": None if debit_side else _money(-minor, scale),
                    "currency": currency,
                    "memo": head["memo"],
                    "amount_precise": _precise_major(precise, scale),
                    "occurred_at": occurred.isoformat().replace("+00:00", "Z"),
                    "billing_period": head["period"],
                    **refs,
                    "occupancy_id": head["occupancy_id"],
                    "job_uid": head["job_uid"],
                    "usage_period": head["usage_period"],
                    "reverses": head["reverses"],
                    "cause_event_ids": list(head["cause_event_ids"] or ()),
                }
            )
            total = sums.setdefault(currency, [0, 0])
            total[0 if minor > 0 else 1] += abs(minor)
            acc = per_account.setdefault((p["account"], currency), [0, 0, Decimal(0)])
            acc[0 if minor > 0 else 1] += abs(minor)
            acc[2] += precise
    totals = [
        {
            "currency": currency,
            "debit": _money(debit, scale_of(currency)),
            "credit": _money(credit, scale_of(currency)),
            "balanced": debit == credit,
        }
        for currency, (debit, credit) in sorted(sums.items())
    ]
    accounts = [
        {
            "account": account,
            "currency": currency,
            "debit": _money(debit, scale_of(currency)),
            "credit": _money(credit, scale_of(currency)),
            "movement_precise": _precise_major(movement, scale_of(currency)),
        }
        for (account, currency), (debit, credit, movement) in sorted(
            per_account.items(), key=lambda kv: (kv[0][1], kv[0][0])
        )
    ]
    return Journal(period, lines, totals, accounts)
