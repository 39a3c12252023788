"""Budgets as use cases: apply a budget file, show budgets against what was spent, check them.

``apply`` works like ``quotas apply``: it diffs the file against the budgets as applied
and appends only the differences (stream ``budget/<workspace>``; ids deterministic over
the stream's version and the change, the append expecting those versions), so applying
the same file twice stores nothing the second time. A workspace the file no longer
lists has its budget removed (the file is the whole list). ``check`` stores the
crossings (:func:`processes.budgets.checks.check_budgets`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection

from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.quotas import refuse_unknown_workspaces
from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.applies import ApplyChange, apply_envelopes, content_digest
from ledger.budgets import (
    Budget,
    BudgetFileError,
    budget_stream,
    budgets_from_document,
    diff_budgets,
    is_exceeded,
    period_of,
    rescale,
)
from ledger.envelopes import Envelope
from ledger.events import BudgetRemoved, BudgetSet
from ledger.money import default_scale, plain_decimal, round_precise
from ledger.prices import PriceSchedule
from ledger.store.base import EventStore
from processes.budgets import BudgetBreach, check_budgets
from projections.billing import BillingProjection, load_schedule
from projections.budgets import (
    BudgetsProjection,
    budgets_at,
    current_budgets,
    exhausted_workspaces,
    spent_by_workspace,
)
from projections.registry import catch_up_all
from projections.steps import catch_up

__all__ = [
    "ApplyResult",
    "BudgetStatus",
    "apply_budget_file",
    "budget_statuses",
    "budget_statuses_on",
    "check",
    "default_instant",
    "parse_budget_file",
]


def _catch_up(store: EventStore, *, billing: bool = False) -> None:
    """The write use cases' step (apply, check): decide on what is stored."""
    projections = [BillingProjection(), BudgetsProjection()] if billing else [BudgetsProjection()]
    catch_up(store, projections)


def _scale_of(schedule: PriceSchedule) -> Callable[[str], int]:
    def scale_of(currency: str) -> int:
        if schedule.currency == currency and schedule.scale is not None:
            return schedule.scale
        return default_scale(currency)

    return scale_of


def parse_budget_file(
    text: str, scale_of: Callable[[str], int], billing_currency: str | None = None
) -> dict[str, Budget]:
    """The budgets of a YAML file; every problem is one :class:`BudgetFileError`."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise BudgetFileError(str(exc)) from None
    return budgets_from_document(raw, scale_of, billing_currency)


def _amount(budget: Budget) -> str:
    return f"{plain_decimal(budget.amount)} {budget.currency}"


def _describe(current: dict[str, Budget], event: BudgetSet | BudgetRemoved) -> str:
    if isinstance(event, BudgetRemoved):
        was = _amount(current[event.workspace])
        return f"removed the budget of workspace {event.workspace} (was {was})"
    new = Budget.from_event(event)
    old = current.get(event.workspace)
    what = f"{_amount(new)} per {new.period}, action {new.action}"
    if old is None:
        return f"set the budget of workspace {event.workspace}: {what}"
    was = f"{_amount(old)} per {old.period}, action {old.action}"
    return f"changed the budget of workspace {event.workspace}: {what} (was {was})"


@dataclass(frozen=True)
class ApplyResult:
    """What an apply did (or, dry-run, would do): one line and one envelope per change."""

    lines: list[str]
    events: list[Envelope]


def _envelopes(
    store: EventStore,
    events: list[BudgetSet | BudgetRemoved],
    at: datetime,
    source: str,
) -> tuple[list[Envelope], dict[str, int]]:
    changes = [
        ApplyChange(event, budget_stream(event.workspace), content_digest(event))
        for event in events
    ]
    return apply_envelopes(changes, store.stream_version, at=at, source=source)


def apply_budget_file(
    store: EventStore,
    text: str,
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
    known_only: bool = False,
) -> ApplyResult:
    """Diff ``text`` against the budgets as applied; append the differences unless dry-run.

    The changes take effect at ``at`` (cluster time; default now) and name ``principal``
    (e.g. ``api/alice``) as their source. A budget's currency must be the price book's
    (when one is published) and its amount exact at that currency's billing scale.
    ``known_only``: a budget set or changed must be for a workspace the ledger knows (the
    CLI asks for it unless ``--allow-unknown-workspace``); a removal is never refused.
    """
    _catch_up(store, billing=True)
    with store.reading() as conn:
        schedule = load_schedule(conn)
        current = current_budgets(conn)
    desired = parse_budget_file(text, _scale_of(schedule), schedule.currency)
    events = diff_budgets(current, desired)
    if known_only:
        refuse_unknown_workspaces(
            store,
            (e.workspace for e in events if isinstance(e, BudgetSet)),
            field="budgets[].workspace",
            override="--allow-unknown-workspace sets a budget ahead of them",
        )
    lines = [_describe(current, e) for e in events]
    envelopes: list[Envelope] = []
    if events:
        envelopes, expected = _envelopes(store, events, at or datetime.now(UTC), principal)
        if not dry_run:
            store.append(envelopes, expected_versions=expected)
            catch_up_all(store)  # the reads after an apply see it
    return ApplyResult(lines, envelopes)


def default_instant(store: EventStore) -> datetime:
    """ "Now" for budgets: the wall clock, or the cluster's when it is a replay's virtual one
    (:func:`dlc_ledger.services.clocks.billing_now`), as billing runs use."""
    return billing_instant(store, None).at


@dataclass(frozen=True)
class BudgetStatus:
    """A workspace's budget at an instant against what it spent in that period."""

    workspace: str
    period: str
    budget_minor: int
    spent_minor: int
    remaining_minor: int  # negative once exceeded
    currency: str
    action: str
    state: str  # ok | exceeded
    exhausted: bool  # a stop budget crossed (stored): the dispatcher stops its work
    since: datetime


def budget_statuses(
    store: EventStore, at: datetime, *, workspaces: Collection[str] | None = None
) -> list[BudgetStatus]:
    """Every budget in force at ``at`` (cluster time) with the posted cost of ``at``'s
    period up to ``at``, in the billing scale, by workspace (a read: as projected);
    ``workspaces``: a reader's scope (None: all)."""
    with store.reading() as conn:
        return budget_statuses_on(conn, at, workspaces=workspaces)


def budget_statuses_on(
    conn: Connection, at: datetime, *, workspaces: Collection[str] | None = None
) -> list[BudgetStatus]:
    """:func:`budget_statuses` on a caller's snapshot (read with what else it shows)."""
    scale_of = _scale_of(load_schedule(conn))
    budgets = budgets_at(conn, at, workspaces=workspaces)
    exhausted = exhausted_workspaces(conn, at)
    out: list[BudgetStatus] = []
    for b in budgets:
        budget = b.budget
        period = period_of(budget.period, at).key
        spent = spent_by_workspace(conn, [budget.workspace], period, at)
        precise = spent.get((budget.workspace, budget.currency), 0)
        limit = rescale(budget.amount_minor, budget.scale, scale_of(budget.currency))
        spent_minor = round_precise(precise)
        out.append(
            BudgetStatus(
                budget.workspace,
                period,
                limit,
                spent_minor,
                limit - spent_minor,
                budget.currency,
                budget.action,
                "exceeded" if is_exceeded(limit, precise) else "ok",
                budget.workspace in exhausted,
                b.since,
            )
        )
    return out


def check(store: EventStore, at: datetime, *, source: str = "scheduler") -> list[BudgetBreach]:
    """Store the crossings of the budgets in force at ``at`` (cluster time) not stored yet."""
    _catch_up(store, billing=True)
    with store.reading() as conn:
        breaches = check_budgets(store, conn, at, source=source)
    if breaches:
        catch_up_all(store)  # the crossings it stored, for the reads after it
    return breaches
