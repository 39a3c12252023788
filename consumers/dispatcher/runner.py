"""The dispatcher process: exactly one active instance, cycling until told to stop.

An instance takes the ``dispatcher`` lease through the store port
(:meth:`ledger.store.base.EventStore.try_lease`) before its first cycle and holds it for
its life; another instance logs "waiting for the dispatcher lease" and polls, taking
over once the holder dies (its database session ends and the lock with it). A holder
that loses its lease (its session dropped) stops acting and waits again.

``once_per_instant`` is for a dispatcher on the cluster's clock (``dispatch --clock
server``): it cycles only when that clock has moved since its last cycle without failures.
On a live cluster the clock moves every second, so nothing changes; a lockstep replay
holds the clock it shows until what happened at an instant has gone through the
pipeline, and so gets exactly one cycle per instant, decided on the settled state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from consumers.dispatcher.loop import CycleOutcome, Dispatcher
from ledger.errors import Conflict
from ledger.store.base import EventStore, Lease

__all__ = ["LEASE_NAME", "LeaseBusy", "run_dispatcher"]

log = logging.getLogger(__name__)

LEASE_NAME = "dispatcher"


class LeaseBusy(Conflict):
    """Another dispatcher holds the lease (a single cycle does not wait for it)."""


def run_dispatcher(
    dispatcher: Dispatcher,
    store: EventStore,
    *,
    follow: bool,
    interval: float,
    stop: threading.Event,
    on_cycle: Callable[[CycleOutcome], None],
    lease_poll: float = 1.0,
    once_per_instant: bool = False,
) -> int:
    """Cycle once (``follow`` False) or until ``stop`` is set; the number of cycles run.

    A failing cycle is logged and retried after ``interval`` when following; a single
    cycle raises it.
    """
    lease: Lease | None = None
    cycles = 0
    waiting = False
    done_at: datetime | None = None  # the instant of the last cycle without failures
    try:
        while not stop.is_set():
            if lease is None or not lease.alive():
                if lease is not None:
                    log.warning("lost the dispatcher lease: waiting to take it again")
                    lease.release()
                lease = store.try_lease(LEASE_NAME)
                if lease is None:
                    if not follow:
                        raise LeaseBusy("another dispatcher holds the lease: nothing was decided")
                    if not waiting:
                        log.warning("waiting for the dispatcher lease")
                        waiting = True
                    stop.wait(lease_poll)
                    continue
                waiting = False
                log.info("took the dispatcher lease")
            try:
                now = dispatcher.clock()
                if once_per_instant and now == done_at:
                    stop.wait(interval)
                    continue
                outcome = dispatcher.cycle(now)
            except Exception:
                if not follow:
                    raise
                log.exception("dispatcher cycle failed; retrying in %.1f s", interval)
            else:
                cycles += 1
                done_at = None if outcome.failures else now
                on_cycle(outcome)
            if not follow:
                break
            stop.wait(interval)
    finally:
        if lease is not None:
            lease.release()
    return cycles
