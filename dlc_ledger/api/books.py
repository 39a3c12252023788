"""``/v1/ledger/balance``: the trial balance and receivables by age, as ``dlc-ledger ledger
balance``.

Only ``admin``, ``finance`` and ``auditor`` may ask (403 for the others): the books are
every workspace's at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from dlc_ledger.api.auth import require_roles
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import AtQuery, plain
from dlc_ledger.api.models import Freshness, Strict
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.services.access import Principal
from projections.billing import currency_scales, read_books

__all__ = ["Books", "router"]

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
