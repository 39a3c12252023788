"""Month to date, per workspace: what it cost so far this month, where that heads by the
month's end, and its budget (``/v1/month-to-date``).

- the month is ``at``'s calendar month in UTC (invoices' and budgets' period);
- ``cost``: the workspace's posted cost of the month up to ``at``, exactly what its
  budget counts as spent (:func:`projections.budgets.projection.spent_by_workspace`:
  usage and the invoices' roundings, rated up to ``at``), summed exactly, rounded once;
- ``forecast``: cost so far plus the month's run rate so far (cost / time elapsed since
  the month's start) times the time left to its end, i.e. cost x month length / time
  elapsed, rounded once (half-even); at the month's first instant (nothing elapsed) the
  cost itself;
- ``budget``: the budget in force at ``at`` with its state (``budgets show``), or None;
- ``prepaid`` (asked for, ``with_prepaid``): what the workspace's subscribed capacity
  cost this month so far: the subscriptions' revenue of the days ended by ``at``,
  attributed by guarantee (:mod:`ledger.subscriptions.showback`). Not in ``cost``, the
  forecast or the budget (which count what is billed).

Rows: the workspaces with cost posted this month or a budget in force, and a
workspace-scoped reader's own workspaces always (at zero when nothing was posted).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from sqlalchemy import Connection

from dlc_ledger.presenters.budgets import status_row
from dlc_ledger.services.budgets import budget_statuses_on
from ledger.budgets import period_of
from ledger.money import PRECISE_DIGITS, plain_decimal, precise_decimal, round_precise
from ledger.subscriptions.showback import UNATTRIBUTED
from projections.billing import billing_currency
from projections.budgets import spent_by_workspace

__all__ = ["forecast_precise", "month_to_date"]

_MICROSECOND = timedelta(microseconds=1)


def forecast_precise(spent: int, start: datetime, at: datetime, end: datetime) -> Fraction:
    """``spent`` (precise units, over ``[start, at)``) run on at the same rate to ``end``:
    spent x (end - start) / (at - start); ``spent`` itself when nothing has elapsed."""
    elapsed = (at - start) // _MICROSECOND  # whole microseconds: exact, no float
    if elapsed <= 0:
        return Fraction(spent)
    return Fraction(spent * ((end - start) // _MICROSECOND), elapsed)


def month_to_date(
    conn: Connection,
    at: datetime,
    *,
    workspaces: Collection[str] | None = None,
    prepaid: Mapping[tuple[Any, ...], int] | None = None,
) -> list[dict[str, Any]]:
    """One row per workspace (see the module docstring), by workspace; amounts in minor
    units (``cost_minor``, ``cost_minor_precise``, ``forecast_minor``, ``currency``).
    ``prepaid``: (workspace, currency) -> the workspace's prepaid cost of the month so far
    (:func:`dlc_ledger.services.subscriptions.prepaid`), set beside its cost as
    ``prepaid_minor``; a workspace with only prepaid cost gets a row."""
    month = period_of("month", at)
    spent = spent_by_workspace(conn, workspaces, month.key, at)
    budgets = {s.workspace: s for s in budget_statuses_on(conn, at, workspaces=workspaces)}
    currency = billing_currency(conn)
    # a subscription's daily recognition posts to no workspace: nobody's month to date;
    # the prepaid showback attributes it (when asked)
    names = {ws for ws, _ in spent if ws is not None} | set(budgets) | set(workspaces or ())
    if prepaid is not None:
        names |= {str(ws) for (ws, _), minor in prepaid.items() if minor and ws != UNATTRIBUTED}
    rows = []
    for ws in sorted(names):
        mine = {cur: amount for (w, cur), amount in spent.items() if w == ws}
        budget = budgets.get(ws)
        shares = {cur: minor for (w, cur), minor in (prepaid or {}).items() if w == ws}
        cur = (
            next(iter(sorted(mine)), None)
            or (budget.currency if budget else currency)
            or next(iter(sorted(shares)), None)
        )
        precise = mine.get(cur, 0) if cur else 0
        forecast = forecast_precise(precise, month.start, at, month.end)
        row: dict[str, Any] = {
            "workspace": ws,
            "month": month.key,
            "from": month.start,
            "as_of": at,
            "cost_minor": round_precise(precise),
            "cost_minor_precise": plain_decimal(precise_decimal(precise)),
            # half-even, as every amount owed (round_precise)
            "forecast_minor": round(forecast / 10**PRECISE_DIGITS),
        }
        if prepaid is not None:
            row["prepaid_minor"] = shares.get(cur, 0) if cur else 0
        row["currency"] = cur
        row["budget"] = None if budget is None else status_row(budget)
        rows.append(row)
    return rows
