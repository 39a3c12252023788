"""One billing tick at a cluster instant: rate, accrue, close the due periods.

Everything time-driven goes through :func:`tick` with an explicit ``now``, so a trace
replay drives it with the cluster's virtual clock, a test with plain instants, and
``dlc-ledger billing serve`` (:mod:`consumers.billing_scheduler`) with the wall clock.

A tick:

1. runs the rater (:func:`processes.billing.rater.rate`): final segments of
   occupancies ended by ``now``, and cost to date of open ones (and of those that end
   after ``now``) at ``now`` floored to the accrual step (default one hour, so ids are
   stable however often ticks run); nothing after ``now`` is ever posted;
2. closes every (workspace, period) whose end + grace window (default one day) has
   passed (:func:`processes.billing.closing.close_periods`);
3. returns what over-settled invoices were settled beyond their totals to the workspaces'
   credit balances (:func:`processes.billing.payments.return_over_settlements`,
   ``InvoiceOverSettled``), then applies each workspace's credit balance (overpayments,
   returned over-settlements) to its open invoices, the ones just issued included
   (:func:`processes.billing.payments.apply_credits`), and marks the invoices still open
   ``due_days`` after their issue overdue
   (:func:`processes.billing.payments.mark_overdue`, ``InvoiceOverdue`` once each;
   ``due_days`` default: the setting ``DLC_INVOICE_DUE_DAYS``, else 30);
4. brings the billing projection to the head, so what it appended is read back at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.errors import Invalid
from ledger.rating import PeriodFn, floor_to
from ledger.store.base import EventStore
from processes.billing.closing import close_periods
from processes.billing.payments import (
    apply_credits,
    invoice_due_days,
    mark_overdue,
    return_over_settlements,
)
from processes.billing.rater import RateResult, rate
from projections.billing import catch_up_billing

__all__ = ["DEFAULT_ACCRUAL_STEP", "DEFAULT_GRACE", "TickResult", "tick"]

DEFAULT_GRACE = timedelta(days=1)
DEFAULT_ACCRUAL_STEP = timedelta(hours=1)


@dataclass(frozen=True)
class TickResult:
    rated: RateResult
    accrued_to: datetime
    invoices: tuple[str, ...]  # ids issued by this tick
    # what the subscriptions' part of the tick booked (processes.tick.billing_tick sets
    # them; a billing-only tick books none): terms renewed, renewal attempts failed,
    # subscriptions expired, days recognised (deferred -> revenue transactions), terms
    # assessed for their SLA credit and what those credits came to (minor units)
    renewed: int = 0
    renewal_failures: int = 0
    expired: int = 0
    recognised: int = 0
    sla_assessed: int = 0
    sla_credited_minor: int = 0
    credits_applied: tuple[str, ...] = ()  # CreditApplied ids appended by this tick
    # InvoiceOverSettled ids appended by this tick (excess returned to credit balances)
    returned: tuple[str, ...] = ()
    overdue: tuple[str, ...] = ()  # invoices this tick marked overdue


def tick(
    store: EventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    accrual_step: timedelta = DEFAULT_ACCRUAL_STEP,
    periods: PeriodFn | None = None,
    due_days: int | None = None,
) -> TickResult:
    """One scheduler tick at cluster instant ``now``: rate, accrue, close due periods, apply
    credit balances, mark overdue invoices."""
    if now.tzinfo is None:
        raise Invalid("now must be timezone-aware")
    if grace < timedelta(0):
        raise Invalid(f"the grace window cannot be negative, got {grace}")
    accrued_to = floor_to(now, accrual_step)
    # nothing after ``now`` is posted: occupancies that end later are accrued, not final
    rated = rate(store, as_of=accrued_to, until=now, periods=periods)
    invoices = close_periods(store, now, grace=grace, periods=periods)
    # before applying: what an over-settled invoice returns is applied in the same tick
    returned = return_over_settlements(store, now)
    applied = apply_credits(store, now)
    days = invoice_due_days() if due_days is None else due_days
    overdue = mark_overdue(store, now, due_days=days)
    catch_up_billing(store)  # its postings and invoices, for the reads after it
    return TickResult(
        rated, accrued_to, invoices, credits_applied=applied, overdue=overdue, returned=returned
    )
