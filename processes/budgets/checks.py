"""The budget check: store a ``BudgetExceeded`` when a workspace's posted cost crosses its budget.

The dispatcher calls :func:`check_budgets` each cycle (and ``dlc-ledger budgets check``
does once) before it reads :func:`projections.budgets.projection.exhausted_workspaces` and
:func:`projections.budgets.projection.jobs_to_stop`. A crossing is stored once per budget (its
``BudgetSet``) and period: the event id is deterministic and the payload too (the
instant of crossing is the posting's, not the check's), so checking again, or from two
processes, never adds a second one. Each crossing also queues a notification to the
workspace (``NotificationQueued``, stream ``notification/<id>``).

Poison (issue 44): a crossing whose ``BudgetExceeded`` or notification cannot be built (a
posted cost beyond the bound of a fact's integer, arithmetic that overflows:
:func:`ledger.store.failures.is_poison`) is dead-lettered (source ``budgets/check``, reason
``check-failed``, payload the workspace, period and budget) and not stored; the other
crossings are. Every check looks at it again, the letter reopening while it still fails.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import orjson
from sqlalchemy import Connection

from ledger.budgets import (
    budget_stream,
    exceeded_event_id,
    exceeding_precise,
    is_exceeded,
    notification_id,
    period_of,
    rescale,
)
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Invalid
from ledger.events import BudgetAction, BudgetExceeded, NotificationQueued
from ledger.money import from_minor, plain_decimal, round_precise
from ledger.store.base import EventStore, UnitOfWork
from ledger.store.failures import is_poison
from projections.billing import load_schedule
from projections.budgets import (
    BudgetInForce,
    BudgetsProjection,
    budgets_at,
    crossing_instant,
    exhausted_workspaces,
    jobs_to_stop,
    spent_by_workspace,
)
from projections.steps import catch_up

__all__ = [
    "CHECK_FAILED_REASON",
    "CHECK_FAILED_SOURCE",
    "BudgetBreach",
    "StoreBudgetGate",
    "check_budgets",
]

log = logging.getLogger(__name__)

#: The ``source`` and ``reason`` of the dead letter of a crossing that cannot be stored.
CHECK_FAILED_SOURCE = "budgets/check"
CHECK_FAILED_REASON = "check-failed"


@dataclass(frozen=True)
class BudgetBreach:
    """A crossing stored by a check: the budget, what was spent when it crossed, and when."""

    workspace: str
    period: str
    action: BudgetAction
    budget_minor: int
    spent_minor: int
    currency: str
    scale: int
    at: datetime
    event_id: UUID
    notification_id: str


@dataclass(frozen=True)
class _Candidate:
    budget: BudgetInForce
    period: str
    budget_minor: int
    scale: int
    event_id: UUID


def _candidates(conn: Connection, now: datetime) -> list[_Candidate]:
    """The budgets in force at ``now`` whose posted cost in ``now``'s period exceeds them."""
    budgets = budgets_at(conn, now)
    if not budgets:
        return []
    schedule = load_schedule(conn)
    out: list[_Candidate] = []
    by_period: dict[str, list[BudgetInForce]] = {}
    for b in budgets:
        by_period.setdefault(period_of(b.budget.period, now).key, []).append(b)
    for period, group in sorted(by_period.items()):
        spent = spent_by_workspace(conn, [b.budget.workspace for b in group], period, now)
        for b in group:
            budget = b.budget
            # posted amounts are minor units at the price book's scale
            scale = (
                schedule.scale
                if schedule.currency == budget.currency and schedule.scale is not None
                else budget.scale
            )
            budget_minor = rescale(budget.amount_minor, budget.scale, scale)
            if is_exceeded(budget_minor, spent.get((budget.workspace, budget.currency), 0)):
                event_id = exceeded_event_id(budget.workspace, period, b.event_id)
                out.append(_Candidate(b, period, budget_minor, scale, event_id))
    return out


def _envelopes(
    candidate: _Candidate, conn: Connection, now: datetime, source: str
) -> tuple[list[Envelope], BudgetBreach] | None:
    budget = candidate.budget.budget
    crossed = crossing_instant(
        conn,
        budget.workspace,
        candidate.period,
        budget.currency,
        exceeding_precise(candidate.budget_minor),
        now,
    )
    if crossed is None:  # the sum rose and fell back by ``now``: not exceeded in order
        return None
    at, running = crossed
    if candidate.budget.since > at:
        # a budget set below what was already spent is exceeded from the moment it is set
        at = candidate.budget.since
        spent = spent_by_workspace(conn, [budget.workspace], candidate.period, at)
        running = spent.get((budget.workspace, budget.currency), running)
    spent_minor = round_precise(running)
    event = BudgetExceeded(
        workspace=budget.workspace,
        budget_minor=candidate.budget_minor,
        spent_minor=spent_minor,
        currency=budget.currency,
        period=candidate.period,
        action=budget.action,
        budget_event_id=candidate.budget.event_id,
    )
    note_id = notification_id(candidate.event_id)

    def amount(minor: int) -> str:
        return plain_decimal(from_minor(minor, candidate.scale))

    note = NotificationQueued(
        notification_id=note_id,
        target=f"workspace/{budget.workspace}",
        subject=f"budget exceeded: workspace {budget.workspace}, {candidate.period}"
        + (" (its pay-as-you-go jobs are stopped)" if budget.action == "stop" else ""),
        body={
            "workspace": budget.workspace,
            "period": candidate.period,
            "action": budget.action,
            "budget": amount(candidate.budget_minor),
            "spent": amount(spent_minor),
            "currency": budget.currency,
        },
    )
    envelopes = [
        make_envelope(
            event,
            event_id=candidate.event_id,
            stream=budget_stream(budget.workspace),
            occurred_at=at,
            observed_at=at,
            source=source,
        ),
        make_envelope(
            note,
            event_id=UUID(note_id),
            stream=f"notification/{note_id}",
            occurred_at=at,
            observed_at=at,
            source=source,
            causation_id=candidate.event_id,
        ),
    ]
    breach = BudgetBreach(
        budget.workspace,
        candidate.period,
        budget.action,
        candidate.budget_minor,
        spent_minor,
        budget.currency,
        candidate.scale,
        at,
        candidate.event_id,
        note_id,
    )
    return envelopes, breach


def check_budgets(
    store: EventStore, conn: Connection, now: datetime, *, source: str = "dispatcher"
) -> list[BudgetBreach]:
    """Store a ``BudgetExceeded`` (and its ``NotificationQueued``) for each budget in force
    at ``now`` (cluster time) whose workspace's posted cost in ``now``'s period exceeds
    it and was not stored yet; return the crossings stored by this call.

    ``conn`` reads the billing and budgets read models (keep them caught up: the
    dispatcher's projector does); the budgets projection is brought up to date here
    before and after, so :func:`projections.budgets.projection.exhausted_workspaces` read next on
    ``conn`` sees what was stored.
    """
    if now.tzinfo is None:
        raise Invalid("now must be timezone-aware")
    catch_up(store, [BudgetsProjection()])
    candidates = _candidates(conn, now)
    if not candidates:
        return []
    stored = store.stored_event_ids([c.event_id for c in candidates])
    candidates = [c for c in candidates if c.event_id not in stored]
    if not candidates:
        return []
    breaches: list[BudgetBreach] = []
    with store.transaction() as uow:
        # under the append lock, so two checkers cannot both store one crossing
        uow.lock_appends()
        envelopes: list[Envelope] = []
        for candidate in candidates:
            stream = budget_stream(candidate.budget.budget.workspace)
            if any(e.event_id == candidate.event_id for e in uow.read_stream(stream)):
                continue
            try:
                built = _envelopes(candidate, conn, now, source)
            except Exception as exc:
                if not is_poison(exc):
                    raise
                _quarantine(uow, candidate, exc)
                continue
            if built is not None:
                envelopes += built[0]
                breaches.append(built[1])
        if envelopes:
            uow.append(envelopes)
    if breaches:
        catch_up(store, [BudgetsProjection()])
    return breaches


def _quarantine(uow: UnitOfWork, candidate: _Candidate, exc: Exception) -> None:
    """Dead-letter a crossing whose events cannot be built; the check goes on."""
    budget = candidate.budget.budget
    what = f"budget of workspace {budget.workspace}, period {candidate.period}"
    log.warning("%s: crossing not stored, it cannot be built: %s", what, exc)
    uow.record_dead_letter(
        source=CHECK_FAILED_SOURCE,
        reason=CHECK_FAILED_REASON,
        error=f"{what}: {type(exc).__name__}: {exc}",
        payload=orjson.dumps(
            {
                "workspace": budget.workspace,
                "period": candidate.period,
                "budget_event_id": str(candidate.budget.event_id),
            }
        ),
    )


@dataclass
class StoreBudgetGate:
    """The budgets as the live dispatcher sees them each cycle (``consumers.dispatcher``'s
    ``BudgetGate``): :meth:`exhausted_workspaces` first checks the budgets on a connection
    of its own (storing new crossings, :func:`check_budgets`), then reads the exhausted
    workspaces on the cycle's ``conn``. Called before anything else reads ``conn``, a
    snapshot taken by the cycle then already holds this cycle's crossings."""

    store: EventStore
    source: str = "dispatcher"
    #: the crossings the latest check stored
    breaches: list[BudgetBreach] = field(default_factory=list)

    def exhausted_workspaces(self, conn: Connection, at: datetime) -> frozenset[str]:
        with self.store.outside_transaction() as own:
            self.breaches = check_budgets(self.store, own, at, source=self.source)
        return exhausted_workspaces(conn, at)

    def jobs_to_stop(self, conn: Connection, at: datetime) -> list[str]:
        """Uids of the exhausted workspaces' pay-as-you-go jobs holding resources (never a
        subscription ``quota`` job); :func:`projections.budgets.projection.jobs_to_stop` has their
        namespace, name and kind."""
        return [job.job_uid for job in jobs_to_stop(conn, at)]
