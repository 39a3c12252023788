"""Budgets as rows for the API (``/v1/budgets``, and each ``/v1/month-to-date`` row's
``budget``): what ``dlc-ledger budgets show`` reads (:func:`budget_statuses_on`: the
budget in force, the posted cost of its period up to the instant, ok or exceeded,
exhausted), with the crossings stored for it (``budgets check`` and the dispatcher
store one ``BudgetExceeded`` per budget and period) and amounts named ``limit``,
``spent``, ``left`` in minor units (a reader's money fields add the display).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from dlc_ledger.services.budgets import BudgetStatus, budget_statuses_on
from projections.budgets import exceeded_budgets

__all__ = ["budget_rows", "status_row"]


def status_row(status: BudgetStatus) -> dict[str, Any]:
    """A budget's state (no crossings): a month-to-date row's ``budget``."""
    return {
        "period": status.period,
        "action": status.action,
        "state": status.state,
        "exhausted": status.exhausted,
        "limit_minor": status.budget_minor,
        "spent_minor": status.spent_minor,
        "left_minor": status.remaining_minor,
        "currency": status.currency,
    }


def _crossings(
    conn: Connection, statuses: list[BudgetStatus], at: datetime
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The crossings stored by ``at`` of each status's workspace and period."""
    wanted = {(s.workspace, s.period) for s in statuses}
    out: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in wanted}
    for period in sorted({s.period for s in statuses}):
        for row in exceeded_budgets(conn, period):
            key = (row["workspace"], period)
            if key in wanted and row["occurred_at"] <= at:
                out[key].append(
                    {
                        "at": row["occurred_at"],
                        "action": row["action"],
                        "limit_minor": int(row["budget_minor"]),
                        "spent_minor": int(row["spent_minor"]),
                        "currency": row["currency"],
                    }
                )
    return out


def budget_rows(
    conn: Connection, at: datetime, *, workspaces: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Every budget in force at ``at`` (cluster time) of ``workspaces`` (None: all), by
    workspace: its state, and ``thresholds_crossed``, the crossings stored for its
    period by then (the instant posted cost went over it, and what was spent then)."""
    statuses = budget_statuses_on(conn, at, workspaces=workspaces)
    crossed = _crossings(conn, statuses, at)
    return [
        {
            "workspace": s.workspace,
            **status_row(s),
            "since": s.since,
            "thresholds_crossed": crossed[(s.workspace, s.period)],
        }
        for s in statuses
    ]
