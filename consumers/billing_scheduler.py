"""The billing scheduler: APScheduler runs the billing tick on a clock until stopped.

``dlc-ledger billing serve`` and ``dlc-ledger up`` run it on the wall clock (``up`` on a
replayed cluster, and ``billing serve --clock cluster``: the cluster time observed, a tick
skipped while none is); each tick is
:func:`processes.tick.billing_tick`, and its counts go to the billing metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from consumers.billing_metrics import record_tick
from ledger.store.base import EventStore
from processes.billing import DEFAULT_GRACE, TickResult
from processes.tick import billing_tick

__all__ = ["build_scheduler", "serve"]


def build_scheduler(
    store: EventStore,
    clock: Callable[[], datetime | None],
    *,
    interval: timedelta = timedelta(minutes=1),
    grace: timedelta = DEFAULT_GRACE,
    on_tick: Callable[[TickResult], None] | None = None,
) -> object:
    """An APScheduler ``BackgroundScheduler`` running the billing tick every ``interval``.

    ``clock`` gives "now" (the wall clock in production, the cluster's virtual
    clock in a replay; None: no "now" known yet, the tick is skipped); jobs never overlap
    (``max_instances=1``, coalesced).
    """
    from apscheduler.schedulers.background import BackgroundScheduler

    def job() -> None:
        now = clock()
        if now is None:
            return
        result = billing_tick(store, now, grace=grace)
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
    store: EventStore,
    stop: threading.Event,
    *,
    interval: timedelta = timedelta(minutes=1),
    grace: timedelta = DEFAULT_GRACE,
    on_tick: Callable[[TickResult], None] | None = None,
    clock: Callable[[], datetime | None] | None = None,
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
