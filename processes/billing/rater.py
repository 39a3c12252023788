"""The rater: turns occupancy facts and prices into ``LedgerTransactionPosted`` events.

Why a process of its own and not part of the projection: postings are facts of
the ledger (DESIGN §5), so they are appended to the store like every other
event, with deterministic ids, and the billing projection folds them back.

One run is one database transaction that

1. takes the store's append lock, so the head cannot move while it decides;
2. brings the billing projection to the head (same transaction, same checkpoint
   as the projector runner), so occupancy facts, prices, posted line totals and
   issued invoices are exactly what the store holds;
3. posts the final segment of every occupancy whose ``OccupancyEnded`` (or late
   ``OccupancyStarted``) was recorded after the rater's checkpoint, and, when
   an ``as_of`` instant is given (the cluster clock), the cost to date of every
   occupancy still open at ``as_of`` (accrual);
4. appends the transactions and saves its checkpoint (``rater:billing``).

So the reads, the appends and the checkpoint commit together: exactly once.
Re-running posts nothing new: the cumulative deltas are zero, and should a
transaction id come up again its event id (derived from it) is already stored.

Poison (issue 44): an occupancy that has no applicable rate (reason ``unrateable``) or
whose rating fails on its values (a rate so large the posting breaks its bounds, arithmetic
that overflows: :func:`ledger.store.failures.is_poison`, reason ``rating-failed``) is
dead-lettered (source ``rater``) and skipped; the others are rated.

Bounds: a run sees only events recorded before it (recorded_at) and rates each
open occupancy only up to ``as_of`` (occurred_at). Usage whose period is locked (an
issued invoice for its workspace, or the period closed: :mod:`ledger.periods`) is
posted to the earliest open period, memo naming the original period
(``usage.usage_period`` and ``service_period`` keep it too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ledger.accounts import RATER_SOURCE, transaction_envelope, transaction_from_delta
from ledger.catalogue import decode
from ledger.envelopes import Envelope
from ledger.events import LedgerTransactionPosted
from ledger.money import precise_from_decimal
from ledger.periods import PeriodLocks, book_into_open
from ledger.prices import NoApplicableRate
from ledger.rating import (
    LineDelta,
    LineKey,
    Occupancy,
    PeriodFn,
    Posted,
    accrue,
    calendar_months,
)
from ledger.store.base import EventStore, UnitOfWork
from ledger.store.failures import is_poison
from projections.billing import (
    WORKLOAD_OF_OCCUPANCY,
    catch_up_billing,
    catch_up_on,
    load_schedule,
    occupancy_from_row,
    period_locks,
)

__all__ = [
    "RATER_CHECKPOINT",
    "RATER_SOURCE",
    "RateResult",
    "decoded_transactions",
    "rate",
]

RATER_CHECKPOINT = "rater:billing"

_OCC_COLS = (
    "occupancy_id, job_uid, workspace, quota, user_name, flavor, mgpu, cpu_milli, memory_mib, "
    "billing_mode, started_at, ended_at, start_event_id, end_event_id, rated_to, "
    "GREATEST(start_position, COALESCE(end_position, 0)) AS pos, "
    f"{WORKLOAD_OF_OCCUPANCY} AS workload"
)


@dataclass(frozen=True)
class RateResult:
    finals: int  # occupancies whose final segment was rated
    accrued: int  # open occupancies rated to as_of
    posted: int  # transactions appended (new)
    unrateable: int  # occupancies without an applicable rate (dead-lettered)
    checkpoint: int


@dataclass(frozen=True)
class _Batch:
    """One transaction's work: the counts, where the checkpoint went, what was posted."""

    done: bool  # no pending final is left beyond this batch
    finals: int
    accrued: int
    posted: int
    unrateable: int
    checkpoint: int
    transactions: list[LedgerTransactionPosted]


def _posted(conn: Connection, occupancy_ids: Sequence[str]) -> dict[str, dict[LineKey, Posted]]:
    out: dict[str, dict[LineKey, Posted]] = {}
    if not occupancy_ids:
        return out
    rows = conn.execute(
        text(
            "SELECT occupancy_id, usage_period, resource, billing_mode, rate, usage, "
            "amount_minor FROM billing_line_totals WHERE occupancy_id = ANY(:ids)"
        ),
        {"ids": list(occupancy_ids)},
    ).all()
    for o, p, r, m, rate, usage, amount in rows:
        out.setdefault(o, {})[LineKey(o, p, r, m, rate)] = Posted(
            int(usage), precise_from_decimal(amount)
        )
    return out


def _transactions(
    deltas: Iterable[LineDelta],
    causes: Sequence[str],
    locks: PeriodLocks,
    *,
    final: bool,
) -> list[LedgerTransactionPosted]:
    out = []
    for delta in deltas:
        step = f"{delta.step}/final" if final else delta.step
        txn = transaction_from_delta(
            delta, cause_event_ids=causes, period=delta.line.period, step=step
        )
        out.append(book_into_open(txn, locks))  # a locked usage period: the open one
    return out


def rate(
    store: EventStore,
    *,
    as_of: datetime | None = None,
    until: datetime | None = None,
    periods: PeriodFn | None = None,
    batch: int = 2000,
    on_posted: Callable[[Sequence[LedgerTransactionPosted]], None] | None = None,
) -> RateResult:
    """Run the rater until no final is pending (and, with ``as_of``, accrue open intervals).

    With ``until`` (a run's "now", default ``as_of``), nothing after it is posted: an
    occupancy that ends later is accrued like an open one, and its final segment waits
    for a run whose ``until`` has passed its end (the checkpoint stays before it).
    """
    period_fn = periods or calendar_months()
    bound = until if until is not None else as_of
    if as_of is not None and bound is not None and as_of > bound:
        as_of = bound
    total = RateResult(0, 0, 0, 0, 0)
    accrue_pending = as_of is not None
    scan = _Scan()
    while True:
        with store.transaction() as uow:
            step = _run_once(uow, as_of if accrue_pending else None, bound, scan, period_fn, batch)
            accrue_pending = False
        total = RateResult(
            total.finals + step.finals,
            total.accrued + step.accrued,
            total.posted + step.posted,
            total.unrateable + step.unrateable,
            step.checkpoint,
        )
        if on_posted is not None and step.transactions:
            on_posted(step.transactions)
        if step.done:
            if total.posted:
                catch_up_billing(store)  # its postings, for the reads after it
            return total


@dataclass
class _Scan:
    """One run's progress over the pending finals: where it has read to, and the first
    position it left for a later run (an occupancy ending after the run's ``until``)."""

    after: int | None = None
    deferred: int | None = None


def _run_once(
    uow: UnitOfWork,
    as_of: datetime | None,
    until: datetime | None,
    scan: _Scan,
    periods: PeriodFn,
    batch: int,
) -> _Batch:
    conn: Connection = uow.connection
    uow.lock_appends()
    catch_up_on(uow)
    head = uow.head_position()
    if uow.load_checkpoint(RATER_CHECKPOINT).updated_at is None:
        uow.save_checkpoint(RATER_CHECKPOINT, position=0)
    cp = uow.load_checkpoint(RATER_CHECKPOINT, for_update=True).position
    schedule = load_schedule(conn)
    if schedule.currency is None:
        return _Batch(True, 0, 0, 0, 0, cp, [])  # nothing can be rated before the first book
    closed = period_locks(uow, periods)

    after = cp if scan.after is None else scan.after
    pending = conn.execute(
        text(
            f"SELECT {_OCC_COLS} FROM billing_occupancies "
            "WHERE started_at IS NOT NULL AND ended_at IS NOT NULL "
            "AND GREATEST(start_position, end_position) > :cp "
            "ORDER BY pos LIMIT :n"
        ),
        {"cp": after, "n": batch},
    ).all()
    done = len(pending) < batch
    scan.after = head if done else int(pending[-1].pos)
    txns: list[LedgerTransactionPosted] = []
    envelopes: list[Envelope] = []
    unrateable = 0
    deferred = 0
    posted = _posted(conn, [r.occupancy_id for r in pending])
    for row in pending:
        occ = occupancy_from_row(row)
        assert occ.end is not None
        if until is not None and occ.end > until:
            deferred += 1  # accrued below as open at as_of; its final waits
            if scan.deferred is None:
                scan.deferred = int(row.pos)
            continue
        causes = [str(row.start_event_id), str(row.end_event_id)]
        try:
            deltas = accrue(occ, schedule, occ.end, posted.get(occ.occupancy_id), periods)
            new = _transactions(deltas, causes, closed, final=True)
            built = [_envelope(t) for t in new]
        except Exception as exc:
            if not isinstance(exc, NoApplicableRate) and not is_poison(exc):
                raise
            unrateable += 1
            _dead_letter(uow, occ, exc)
            continue
        txns.extend(new)
        envelopes.extend(built)

    accrued = 0
    if as_of is not None:
        # open at as_of: not ended, or ending after the run's until (as_of <= until)
        open_rows = conn.execute(
            text(
                f"SELECT {_OCC_COLS} FROM billing_occupancies "
                "WHERE (ended_at IS NULL OR ended_at > :u) "
                "AND started_at IS NOT NULL AND started_at < :t "
                "AND (rated_to IS NULL OR rated_to < :t) ORDER BY occupancy_id"
            ),
            {"t": as_of, "u": until or as_of},
        ).all()
        open_posted = _posted(conn, [r.occupancy_id for r in open_rows])
        for row in open_rows:
            occ = occupancy_from_row(row)
            try:
                deltas = accrue(occ, schedule, as_of, open_posted.get(occ.occupancy_id), periods)
                new = _transactions(deltas, [str(row.start_event_id)], closed, final=False)
                built = [_envelope(t) for t in new]
            except Exception as exc:
                if not isinstance(exc, NoApplicableRate) and not is_poison(exc):
                    raise
                unrateable += 1
                _dead_letter(uow, occ, exc)
                continue
            accrued += 1
            txns.extend(new)
            envelopes.extend(built)

    appended = 0
    if envelopes:
        result = uow.append(envelopes, on_conflict="dead-letter")
        appended = len(result.positions)
    # the checkpoint never passes a final left for a later run
    new_cp = scan.after if scan.deferred is None else min(scan.after, scan.deferred - 1)
    uow.save_checkpoint(RATER_CHECKPOINT, position=new_cp)
    finals = len(pending) - unrateable - deferred
    return _Batch(done, finals, accrued, appended, unrateable, new_cp, txns)


def _envelope(t: LedgerTransactionPosted) -> Envelope:
    assert t.usage is not None  # rating transactions always carry their usage
    return transaction_envelope(t, t.usage.as_of)


def _dead_letter(uow: UnitOfWork, occ: Occupancy, exc: Exception) -> None:
    import orjson

    uow.record_dead_letter(
        source=RATER_SOURCE,
        reason="unrateable" if isinstance(exc, NoApplicableRate) else "rating-failed",
        error=f"occupancy {occ.occupancy_id} of job {occ.job_uid}: {exc}",
        payload=orjson.dumps({"occupancy_id": occ.occupancy_id, "job_uid": occ.job_uid}),
    )


def decoded_transactions(records: Iterable[Any]) -> list[LedgerTransactionPosted]:
    """Typed transactions from recorded events (helper for tests and the CLI)."""
    out = []
    for r in records:
        d = decode(r.envelope)
        if isinstance(d, LedgerTransactionPosted):
            out.append(d)
    return out
