"""Period locks as use cases: close a month (``billing close --period P``), list periods.

A month closed is locked for every workspace: a posting dated into it later (a back-dated
purchase, a refund, a late usage rating) is booked into the earliest open month as an
adjustment naming its dates, and reaches that month's invoice (docs/finance.md, Period
locks). The close first runs one billing tick at the instant (renewals, recognition,
rating up to it), so what the month holds by then is on its invoices.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dlc_ledger.services.billing.ticks import tick
from dlc_ledger.services.clocks import billing_instant
from ledger.store.base import EventStore
from processes.billing import PeriodClose, close_period
from projections.billing import period_rows
from projections.registry import catch_up_all

__all__ = ["close_month", "list_periods"]


def close_month(
    store: EventStore,
    period: str,
    *,
    principal: str,
    at: datetime | None = None,
    force: bool = False,
    reason: str = "",
) -> PeriodClose:
    """Lock ``period`` at cluster instant ``at`` (default: the billing instant, as ``billing
    run``'s; ``force`` as its) after one tick there, and issue its invoices."""
    now = billing_instant(store, at, force=force).at
    tick(store, now)
    done = close_period(store, period, now, source=principal, reason=reason)
    catch_up_all(store)
    return done


def list_periods(store: EventStore) -> list[dict[str, Any]]:
    """Every period with postings, invoices or a close: ``locked`` or ``open``."""
    with store.snapshot() as uow:
        return period_rows(uow)
