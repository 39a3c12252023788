"""Billing's scheduled work: hourly accrual, period close and invoice issue (APScheduler).

Everything time-driven goes through :func:`tick` with an explicit ``now``, so a
trace replay drives it with the cluster's virtual clock and a test with plain
instants; ``dlc-ledger billing serve`` runs the same function under an
APScheduler ``BackgroundScheduler`` on the wall clock.

A tick:

1. runs the rater (:func:`projections.billing.rater.rate`): final segments of
   occupancies ended by ``now``, and cost to date of open ones (and of those that
   end after ``now``) at ``now`` floored to the accrual step (default one hour, so
   ids are stable however often ticks run); nothing after ``now`` is ever posted;
2. closes every (workspace, period) with postings whose period end + grace
   window (default one day) has passed and that has no issued invoice: one
   ``InvoiceIssued`` (stream ``invoice/<id>``) built from the posted transactions
   only, in the same transaction that read them, under the store's append lock.
   Its lines are rounded once each from their precise sums; the rounding is posted
   with it (``ledger.invoices.invoice_rounding``, account ``revenue/rounding``).

A voided invoice reopens its period; the next tick issues revision + 1.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from consumers.billing_metrics import record_tick
from consumers.projector import catch_up_to_read
from ledger.envelopes import make_envelope
from ledger.events import LedgerTransactionPosted
from ledger.ids import deterministic_id
from ledger.invoices import build_invoice, invoice_rounding
from ledger.rating import PeriodFn, calendar_months
from ledger.store.postgres import PostgresEventStore
from projections.billing.projection import BillingProjection, catch_up_on
from projections.billing.rater import RateResult, rate, transaction_envelope

__all__ = [
    "DEFAULT_ACCRUAL_STEP",
    "DEFAULT_GRACE",
    "TickResult",
    "build_scheduler",
    "close_periods",
    "floor_to",
    "serve",
    "sync_billing",
    "tick",
]

DEFAULT_GRACE = timedelta(days=1)
DEFAULT_ACCRUAL_STEP = timedelta(hours=1)
SOURCE = "scheduler"


@dataclass(frozen=True)
class TickResult:
    rated: RateResult
    accrued_to: datetime
    invoices: tuple[str, ...]  # ids issued by this tick


def sync_billing(store: PostgresEventStore) -> None:
    """Bring the billing projection to the store's head before reading it (a reader role
    reads it as projected)."""
    catch_up_to_read(store, [BillingProjection()])


def floor_to(t: datetime, step: timedelta) -> datetime:
    """``t`` rounded down to a multiple of ``step`` since the Unix epoch (UTC)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((t - epoch) // step) * step


def _period_end(key: str, periods: PeriodFn) -> datetime:
    year, month = (int(p) for p in key.split("-"))
    return periods(datetime(year, month, 15, tzinfo=UTC)).end


def close_periods(
    store: PostgresEventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    periods: PeriodFn | None = None,
) -> tuple[str, ...]:
    """Issue one invoice per workspace per period whose end + ``grace`` <= ``now``."""
    period_fn = periods or calendar_months()
    issued: list[str] = []
    with store.transaction() as uow:
        conn = uow.connection
        uow.lock_appends()
        catch_up_on(uow)
        candidates = conn.execute(
            text(
                "SELECT DISTINCT t.workspace, t.period FROM billing_transactions t "
                "WHERE t.period IS NOT NULL AND t.workspace IS NOT NULL AND NOT EXISTS ("
                " SELECT 1 FROM billing_invoices i WHERE i.workspace = t.workspace "
                " AND i.period = t.period AND i.status = 'issued') "
                "ORDER BY t.period, t.workspace"
            )
        ).all()
        envelopes = []
        for workspace, period in candidates:
            if _period_end(period, period_fn) + grace > now:
                continue
            revision = int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM billing_invoices WHERE workspace = :w AND period = :p"
                    ),
                    {"w": workspace, "p": period},
                ).scalar_one()
            )
            txns = [
                LedgerTransactionPosted.model_validate(data)
                for (data,) in conn.execute(
                    text(
                        "SELECT data FROM billing_transactions "
                        "WHERE period = :p AND workspace = :w AND usage_period IS NOT NULL "
                        "ORDER BY position"
                    ),
                    {"p": period, "w": workspace},
                )
            ]
            invoice = build_invoice(workspace, period, txns, now, revision=revision)
            event_id = deterministic_id("event", "InvoiceIssued", invoice.invoice_id)
            envelopes.append(
                make_envelope(
                    invoice,
                    event_id=event_id,
                    stream=f"invoice/{invoice.invoice_id}",
                    occurred_at=now,
                    observed_at=now,
                    source=SOURCE,
                )
            )
            rounding = invoice_rounding(invoice, cause_event_ids=[str(event_id)])
            if rounding is not None:
                envelopes.append(transaction_envelope(rounding, now))
            issued.append(invoice.invoice_id)
        if envelopes:
            uow.append(envelopes, on_conflict="dead-letter")
    return tuple(issued)


def tick(
    store: PostgresEventStore,
    now: datetime,
    *,
    grace: timedelta = DEFAULT_GRACE,
    accrual_step: timedelta = DEFAULT_ACCRUAL_STEP,
    periods: PeriodFn | None = None,
) -> TickResult:
    """One scheduler tick at cluster instant ``now``: rate, accrue, close due periods."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if grace < timedelta(0):
        raise ValueError(f"the grace window cannot be negative, got {grace}")
    accrued_to = floor_to(now, accrual_step)
    # nothing after ``now`` is posted: occupancies that end later are accrued, not final
    rated = rate(store, as_of=accrued_to, until=now, periods=periods)
    invoices = close_periods(store, now, grace=grace, periods=periods)
    return TickResult(rated, accrued_to, invoices)


def build_scheduler(
    store: PostgresEventStore,
    clock: Callable[[], datetime],
    *,
    interval: timedelta = timedelta(minutes=1),
    grace: timedelta = DEFAULT_GRACE,
    on_tick: Callable[[TickResult], None] | None = None,
) -> object:
    """An APScheduler ``BackgroundScheduler`` running :func:`tick` every ``interval``.

    ``clock`` gives "now" (the wall clock in production, the cluster's virtual
    clock in a replay); jobs never overlap (``max_instances=1``, coalesced).
    """
    from apscheduler.schedulers.background import BackgroundScheduler

    def job() -> None:
        result = tick(store, clock(), grace=grace)
        record_tick(result.rated.posted, result.rated.unrateable, len(result.invoices))
        if on_tick is not None:
            on_tick(result)

    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(
        job,
        "interval",
        seconds=interval.total_seconds(),
        id="billing-tick",
        max_instances=1,
        coalesce=True,
        next_run_time=datetime.now(UTC),
    )
    return scheduler


def serve(
    store: PostgresEventStore,
    stop: threading.Event,
    *,
    interval: timedelta = timedelta(minutes=1),
    grace: timedelta = DEFAULT_GRACE,
    on_tick: Callable[[TickResult], None] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> None:
    """Run the billing scheduler until ``stop`` is set, on ``clock`` (default: the wall
    clock; ``dlc-ledger up`` on a replayed cluster passes the cluster time observed)."""
    scheduler = build_scheduler(
        store,
        clock or (lambda: datetime.now(UTC)),
        interval=interval,
        grace=grace,
        on_tick=on_tick,
    )
    scheduler.start()  # type: ignore[attr-defined]
    try:
        stop.wait()
    finally:
        scheduler.shutdown(wait=True)  # type: ignore[attr-defined]
