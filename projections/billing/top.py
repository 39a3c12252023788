"""The costliest groups of a window (``/v1/cost/top``), ordered and cut in SQL.

A dashboard shows the top N of thousands of jobs (or users, quotas, workspaces) beside
the window's total. From the ledger (``report cost``'s ledger source, which ``auto``
takes for a window on month boundaries) one statement sums the groups, orders them by
cost (descending, ties by key), keeps N, counts the groups and sums the whole window's
cost exactly: the total is rounded once, as ``report cost`` without group keys rounds
it, so it equals the report's to the minor unit (never a sum of rounded rows). Cost
rated from the facts (a window off month boundaries) is rated as ``report cost`` rates
it, every occupancy of the window in Python, then ordered and cut here.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, text

from ledger.errors import Invalid
from ledger.money import precise_decimal, precise_from_decimal
from projections.billing.reports import (
    ReportWindow,
    Source,
    cost_report,
    cost_row,
    ledger_cost_sql,
    uses_ledger,
)
from projections.pages import check_limit

__all__ = ["TOP_KEYS", "CostTop", "cost_top"]

#: what a top list groups by (one key each)
TOP_KEYS = ("job", "user", "quota", "workspace")


@dataclass(frozen=True)
class CostTop:
    """The ``n`` costliest groups, how many groups the window holds, and its total."""

    #: each: the key under its name (``{"job": "a-1"}``), ``cost_minor``,
    #: ``cost_minor_precise`` and ``currency``; costliest first, ties by key
    rows: list[dict[str, Any]]
    groups: int
    #: the window's whole cost rounded once: ``cost_minor``, ``cost_minor_precise``,
    #: ``currency`` (None when the window holds no cost)
    total: dict[str, Any]


def cost_top(
    conn: Connection, by: str, window: ReportWindow, n: int, *, source: Source = "auto"
) -> CostTop:
    """The ``n`` costliest groups by ``by`` (:data:`TOP_KEYS`) in ``window``, as
    ``report cost --group-by <by>`` costs them (the same source rule and scope)."""
    if by not in TOP_KEYS:
        raise Invalid(f"unknown key {by!r}: use {', '.join(TOP_KEYS)}")
    check_limit(n, option="n")
    if uses_ledger((by,), window, source):
        return _ledger_top(conn, by, window, n)
    return _rated_top(conn, by, window, n)


def _ledger_top(conn: Connection, by: str, window: ReportWindow, n: int) -> CostTop:
    params: dict[str, Any] = {"n": n}
    groups = ledger_cost_sql((by,), window, params)
    key = f'"{by}"'  # one of TOP_KEYS: a quoted alias (bare ``user`` is CURRENT_USER)
    rows = conn.execute(
        text(
            f"WITH g AS MATERIALIZED ({groups}),"
            " t AS (SELECT count(*) AS groups, count(DISTINCT currency) AS currencies,"
            "  min(currency) AS currency, COALESCE(sum(cost), 0) AS total FROM g) "
            "SELECT t.groups, t.currencies, t.currency AS total_currency, t.total,"
            " top.key, top.currency, top.cost FROM t LEFT JOIN LATERAL ("
            f"  SELECT {key} AS key, currency, cost FROM g"
            f'  ORDER BY cost DESC, {key} COLLATE "C" LIMIT :n) top ON TRUE'
        ),
        params,
    ).all()
    first = rows[0]  # t is one row, with or without groups
    _one_currency(int(first.currencies))
    items = [cost_row({by: r.key}, Decimal(r.cost), r.currency) for r in rows if r.currency]
    total = cost_row({}, Decimal(first.total), first.total_currency)
    return CostTop(items, int(first.groups), total)


def _rated_top(conn: Connection, by: str, window: ReportWindow, n: int) -> CostTop:
    # the costliest groups: a billed month that cost nothing is no group of it, as on the
    # ledger's side
    rows = cost_report(conn, (by,), window, source="rated", billed_months=False)
    currencies = sorted({r["currency"] for r in rows})
    _one_currency(len(currencies))
    precise = sum(precise_from_decimal(r["cost_minor_precise"]) for r in rows)
    total = cost_row({}, precise_decimal(precise), currencies[0] if currencies else None)
    ordered = sorted(rows, key=lambda r: (-r["cost_minor_precise"], _text(r[by])))
    return CostTop(ordered[:n], len(rows), total)


def _text(value: object) -> tuple[bool, bytes]:
    # as the ledger's top is ordered: by UTF-8 bytes (collation "C"), nulls last
    return (value is None, b"" if value is None else str(value).encode())


def _one_currency(currencies: int) -> None:
    """Costs in two currencies have no order nor total (a schedule bills in one)."""
    if currencies > 1:
        raise Invalid("the window's cost is in several currencies: narrow it to one price book")
