"""The budgets read model, and the reads the dispatcher and ``dlc-ledger budgets`` make of it.

Tables (migration ``0015_budgets``):

- ``budget_changes``: every ``BudgetSet`` / ``BudgetRemoved``, effective at its
  ``occurred_at`` (``budgets apply --effective-at``); the budget in force at an instant
  is a workspace's latest change by then, and the current one (what ``apply`` diffs
  against) its latest by position;
- ``budget_exceedances``: every ``BudgetExceeded`` (one per budget and period).

Spent is read from the billing read model: the workspace's posted ledger transactions
(``billing_transactions``, receivable side) of the period, in the budget's currency,
rated up to the instant asked about (their ``as_of``). The rules are
:mod:`ledger.budgets`'; ``docs/billing.md`` ("Budgets").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    SmallInteger,
    Table,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import insert

from ledger.budgets import (
    PAY_AS_YOU_GO,
    STOPPABLE_STATUSES,
    Budget,
    Crossing,
    JobToStop,
    is_exhausted,
    period_of,
    stops,
)
from ledger.money import plain_decimal, precise_decimal, precise_from_decimal
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection

__all__ = [
    "BudgetInForce",
    "BudgetsProjection",
    "budget_changes",
    "budget_exceedances",
    "budgets_at",
    "crossing_instant",
    "current_budgets",
    "exceeded_budgets",
    "exhausted_workspaces",
    "jobs_to_stop",
    "spent_by_workspace",
]

_TS = DateTime(timezone=True)

budget_changes = Table(
    "budget_changes",
    metadata,
    Column("position", BigInteger, primary_key=True),
    Column("event_id", Uuid, nullable=False),
    Column("workspace", Text, nullable=False),
    Column("occurred_at", _TS, nullable=False),
    Column("removed", Boolean, nullable=False),
    Column("amount_minor", BigInteger),
    Column("currency", Text),
    Column("scale", SmallInteger),
    Column("period", Text),
    Column("action", Text),
    Index("budget_changes_workspace", "workspace", "occurred_at"),
)

budget_exceedances = Table(
    "budget_exceedances",
    metadata,
    Column("event_id", Uuid, primary_key=True),
    Column("workspace", Text, nullable=False),
    Column("period", Text, nullable=False),
    Column("budget_event_id", Text),
    Column("budget_minor", BigInteger, nullable=False),
    Column("spent_minor", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("action", Text),
    Column("occurred_at", _TS, nullable=False),
    Column("position", BigInteger, nullable=False),
    Index("budget_exceedances_period", "period", "workspace"),
)


class BudgetsProjection(Projection):
    name = "budgets"
    cost = 0.1
    tables = (budget_changes, budget_exceedances)
    event_types = frozenset({"BudgetSet", "BudgetRemoved", "BudgetExceeded"})

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        changes: list[dict[str, Any]] = []
        crossings: list[dict[str, Any]] = []
        for e in events:
            d = e.data
            if e.type in ("BudgetSet", "BudgetRemoved"):
                set_ = e.type == "BudgetSet"
                changes.append(
                    {
                        "position": e.position,
                        "event_id": e.event_id,
                        "workspace": d["workspace"],
                        "occurred_at": e.occurred_at,
                        "removed": not set_,
                        "amount_minor": d.get("amount_minor") if set_ else None,
                        "currency": d.get("currency") if set_ else None,
                        "scale": d.get("scale") if set_ else None,
                        "period": d.get("period", "month") if set_ else None,
                        "action": d.get("action", "notify") if set_ else None,
                    }
                )
            elif e.type == "BudgetExceeded":
                crossings.append(
                    {
                        "event_id": e.event_id,
                        "workspace": d["workspace"],
                        "period": d.get("period") or period_of("month", e.occurred_at).key,
                        "budget_event_id": d.get("budget_event_id"),
                        "budget_minor": d["budget_minor"],
                        "spent_minor": d["spent_minor"],
                        "currency": d["currency"],
                        "action": d.get("action"),
                        "occurred_at": e.occurred_at,
                        "position": e.position,
                    }
                )
        if changes:
            conn.execute(insert(budget_changes).on_conflict_do_nothing(), changes)
        if crossings:
            conn.execute(insert(budget_exceedances).on_conflict_do_nothing(), crossings)


# --- reads ----------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetInForce:
    """A workspace's budget at some instant, with the ``BudgetSet`` that set it."""

    budget: Budget
    event_id: str
    since: datetime


def _budget(row: Any) -> Budget:
    return Budget(
        row.workspace,
        int(row.amount_minor),
        row.currency,
        int(row.scale),
        row.period,
        row.action,
    )


_COLUMNS = (
    "workspace, event_id, occurred_at, removed, amount_minor, currency, scale, period, action"
)


def current_budgets(conn: Connection) -> dict[str, Budget]:
    """Every workspace's latest budget as applied (by store position), removed ones left out:
    what ``budgets apply`` diffs a file against."""
    rows = conn.execute(
        text(
            f"SELECT DISTINCT ON (workspace) {_COLUMNS} FROM budget_changes "
            "ORDER BY workspace, position DESC"
        )
    )
    return {r.workspace: _budget(r) for r in rows if not r.removed}


def budgets_at(
    conn: Connection, at: datetime, *, workspaces: Collection[str] | None = None
) -> list[BudgetInForce]:
    """The budgets in force at ``at`` (cluster time): each workspace's latest change
    effective by then, by workspace; ``workspaces``: only theirs (a reader's scope)."""
    rows = conn.execute(
        text(
            f"SELECT DISTINCT ON (workspace) {_COLUMNS} FROM budget_changes "
            "WHERE occurred_at <= :at"
            " AND (CAST(:ws AS text[]) IS NULL OR workspace = ANY(:ws))"
            " ORDER BY workspace, occurred_at DESC, position DESC"
        ),
        {"at": at, "ws": None if workspaces is None else sorted(workspaces)},
    )
    return [
        BudgetInForce(_budget(r), str(r.event_id), r.occurred_at) for r in rows if not r.removed
    ]


_POSTED_BY = "COALESCE(as_of, occurred_at)"


def spent_by_workspace(
    conn: Connection, workspaces: Collection[str] | None, period: str, at: datetime
) -> dict[tuple[str, str], int]:
    """Posted cost per (workspace, currency) in ``period`` (``YYYY-MM``), rated up to
    ``at``, in precise units (10**-9 minor units, as posted); ``workspaces`` None: every
    workspace that has any."""
    if workspaces is not None and not workspaces:
        return {}
    rows = conn.execute(
        text(
            "SELECT workspace, currency, sum(amount_minor) AS spent FROM billing_transactions "
            "WHERE period = :p AND (CAST(:ws AS text[]) IS NULL OR workspace = ANY(:ws)) "
            f"AND {_POSTED_BY} <= :at AND currency IS NOT NULL GROUP BY workspace, currency"
        ),
        {"p": period, "ws": None if workspaces is None else sorted(set(workspaces)), "at": at},
    )
    return {(r.workspace, r.currency): precise_from_decimal(r.spent) for r in rows}


def crossing_instant(
    conn: Connection,
    workspace: str,
    period: str,
    currency: str,
    threshold_precise: int,
    at: datetime,
) -> tuple[datetime, int] | None:
    """The first instant (a posting's ``as_of``) at which the workspace's running posted
    cost in ``period`` reached ``threshold_precise``, and the running sum then; None if
    it has not by ``at``. Postings at one instant count together."""
    row = conn.execute(
        text(
            "SELECT posted_at, running FROM ("
            f" SELECT {_POSTED_BY} AS posted_at,"
            f"  sum(amount_minor) OVER (ORDER BY {_POSTED_BY}) AS running"
            " FROM billing_transactions"
            " WHERE period = :p AND workspace = :w AND currency = :c"
            f"  AND {_POSTED_BY} <= :at) s "
            "WHERE running >= CAST(:threshold AS numeric) ORDER BY posted_at LIMIT 1"
        ),
        {
            "p": period,
            "w": workspace,
            "c": currency,
            "at": at,
            "threshold": _decimal(threshold_precise),
        },
    ).first()
    if row is None:
        return None
    return row.posted_at, precise_from_decimal(row.running)


def _decimal(precise: int) -> str:
    return plain_decimal(precise_decimal(precise))


def exceeded_budgets(conn: Connection, period: str) -> list[dict[str, Any]]:
    """The ``BudgetExceeded`` facts of ``period`` (``YYYY-MM``), by workspace then time."""
    rows = conn.execute(
        budget_exceedances.select()
        .where(budget_exceedances.c.period == period)
        .order_by(budget_exceedances.c.workspace, budget_exceedances.c.occurred_at)
    )
    return [dict(r._mapping) for r in rows]


def _crossings(
    conn: Connection, workspaces: Sequence[str], at: datetime
) -> dict[str, list[Crossing]]:
    rows = conn.execute(
        text(
            "SELECT workspace, budget_event_id, period, occurred_at FROM budget_exceedances "
            "WHERE workspace = ANY(:ws) AND occurred_at <= :at"
        ),
        {"ws": sorted(set(workspaces)), "at": at},
    )
    out: dict[str, list[Crossing]] = {}
    for r in rows:
        out.setdefault(r.workspace, []).append(
            Crossing(r.budget_event_id or "", r.period, r.occurred_at)
        )
    return out


def exhausted_workspaces(conn: Connection, at: datetime) -> frozenset[str]:
    """Workspaces whose ``stop`` budget in force at ``at`` was crossed in ``at``'s period by
    then: the dispatcher admits nothing new of theirs (``CycleInput.blocked_workspaces``)
    and suspends their pay-as-you-go jobs (:func:`jobs_to_stop`). Reads what
    ``processes.budgets.checks.check_budgets`` stored: call it first."""
    stopping = [b for b in budgets_at(conn, at) if b.budget.action == "stop"]
    if not stopping:
        return frozenset()
    crossings = _crossings(conn, [b.budget.workspace for b in stopping], at)
    return frozenset(
        b.budget.workspace
        for b in stopping
        if is_exhausted(b.budget, b.event_id, crossings.get(b.budget.workspace, ()), at)
    )


def jobs_to_stop(conn: Connection, at: datetime) -> list[JobToStop]:
    """The exhausted workspaces' pay-as-you-go jobs that hold (or are about to hold)
    resources, as the job projection has them now: what the dispatcher suspends.
    Subscription (``quota``) jobs are never listed, nor jobs never seen submitted (no
    name to suspend them by)."""
    exhausted = exhausted_workspaces(conn, at)
    if not exhausted:
        return []
    rows = conn.execute(
        text(
            "SELECT job_uid, namespace, name, kind, workspace, billing_mode, status "
            "FROM job_state WHERE workspace = ANY(:ws) AND status = ANY(:statuses) "
            "AND billing_mode = ANY(:modes) AND name IS NOT NULL ORDER BY workspace, job_uid"
        ),
        {
            "ws": sorted(exhausted),
            "statuses": sorted(STOPPABLE_STATUSES),
            "modes": sorted(PAY_AS_YOU_GO),
        },
    )
    return [
        JobToStop(
            r.job_uid,
            r.namespace or "default",
            r.name,
            r.kind or "Job",
            r.workspace,
            r.billing_mode,
            r.status,
        )
        for r in rows
        if stops(r.billing_mode, r.status)
    ]
