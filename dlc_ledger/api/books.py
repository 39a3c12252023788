"""``/v1/ledger/balance``: the trial balance and receivables by age, as ``dlc-ledger ledger
balance``; ``/v1/ledger/export``: a month's journal, as ``dlc-ledger ledger export``.

Only ``admin``, ``finance`` and ``auditor`` may ask (403 for the others): the books are
every workspace's at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import Field

from dlc_ledger.api.auth import require_roles
from dlc_ledger.api.csv_responses import CSV_MEDIA, CSV_RESPONSES, FormatQuery, wants_csv
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import AtQuery, plain
from dlc_ledger.api.models import Freshness, Strict
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.presenters import journal_csv, journal_document
from dlc_ledger.services.access import Principal
from ledger.errors import Conflict
from projections.billing import currency_scales, read_books, read_journal

__all__ = ["Books", "JournalExport", "router"]

router = APIRouter(prefix="/v1/ledger", tags=["ledger"], responses=PROBLEM_RESPONSES)

Bookkeeper = Annotated[Principal, Depends(require_roles("admin", "finance", "auditor"))]


class AccountBalance(Strict):
    account: str
    currency: str
    debit: str
    credit: str
    balance: str


class CurrencyTotal(Strict):
    currency: str
    debit: str
    credit: str
    balanced: bool


class Receivable(Strict):
    """A workspace's receivable: ``open`` (its period has not ended, not invoiced), then by
    days since the period it was posted to ended."""

    workspace: str
    currency: str
    open: str
    d0_30: str
    d31_60: str
    d61_90: str
    over_90: str
    total: str


class Books(Strict):
    """Amounts are decimal strings in their currency, at the postings' full precision."""

    accounts: list[AccountBalance]
    totals: list[CurrencyTotal]
    receivables_at: str | None = None
    receivables: list[Receivable]
    freshness: Freshness | None = None


_AGE_FIELDS = {"0-30": "d0_30", "31-60": "d31_60", "61-90": "d61_90", "over-90": "over_90"}


@router.get(
    "/balance",
    response_model=Books,
    response_model_exclude_unset=True,
    summary="The trial balance and receivables by age (roles admin, finance, auditor)",
)
def get_balance(request: Request, _principal: Bookkeeper, at: AtQuery = None) -> dict[str, Any]:
    """Every account's debits, credits and balance (postings that occurred by ``at``), the
    totals per currency (``balanced``: debits equal credits), and each workspace's receivable
    by age at ``at`` (default: the cluster clock)."""
    with request.app.state.store.reading() as conn:
        books = read_books(conn, currency_scales(conn), at)
    receivables = [{_AGE_FIELDS.get(k, k): v for k, v in row.items()} for row in books.receivables]
    document: dict[str, Any] = plain(
        {
            "accounts": books.balance.rows,
            "totals": books.balance.totals,
            "receivables_at": books.aged_at,
            "receivables": receivables,
        }
    )
    return with_freshness(request, document)


class JournalLine(Strict):
    """One posting: ``debit`` or ``credit`` (the other null) in whole minor units at the
    currency's scale, ``amount_precise`` the signed amount as booked (sub-minor)."""

    date: str
    journal_id: str
    line: int
    account: str
    debit: str | None
    credit: str | None
    currency: str
    memo: str
    amount_precise: str
    occurred_at: str
    billing_period: str | None
    workspace: str | None
    invoice_id: str | None
    credit_note_id: str | None
    subscription_id: str | None
    occupancy_id: str | None
    job_uid: str | None
    usage_period: str | None
    reverses: str | None
    cause_event_ids: list[str]


class AccountMovement(Strict):
    account: str
    currency: str
    debit: str
    credit: str
    movement_precise: str


class JournalExport(Strict):
    """A month's journal (docs/finance.md, "Journal export"): the postings of the
    transactions that occurred after ``from`` and by ``to``."""

    period: str
    from_: str = Field(alias="from")
    to: str
    lines: list[JournalLine]
    totals: list[CurrencyTotal]
    accounts: list[AccountMovement]
    freshness: Freshness | None = None


@router.get(
    "/export",
    response_model=JournalExport,
    response_model_exclude_unset=True,
    response_model_by_alias=True,
    responses=CSV_RESPONSES,
    summary="A month's journal for a general ledger (roles admin, finance, auditor)",
)
def get_export(
    request: Request,
    _principal: Bookkeeper,
    period: Annotated[str, Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM.")],
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """One line per posting of the month (date, journal id, account, debit, credit,
    currency, memo, references to the invoice, subscription, occupancy and job), balanced
    per transaction and currency, equal to the trial balance's movements over the month;
    ``?format=csv`` (or ``Accept: text/csv``) for the lines as a CSV file."""
    with request.app.state.store.reading() as conn:
        found = read_journal(conn, currency_scales(conn), period)
    if not all(total["balanced"] for total in found.totals):
        raise Conflict(
            f"the journal of {period} does not balance: debits and credits differ (a bug)"
        )
    if wants_csv(request, fmt):
        return Response(
            journal_csv(found),
            media_type=f"{CSV_MEDIA}; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="journal-{period}.csv"'},
        )
    return with_freshness(request, journal_document(found))
