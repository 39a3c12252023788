"""Quota figures at every node of the tree, leaves and inner nodes alike: the quota
tree read of the API and the dashboard (``dlc-ledger quotas tree``).

Nothing is computed twice: the per node x flavor usage (min, max, used, borrowed,
lent, queued demand, job counts) is :func:`projections.quotas.reads.usage_at`, whose
arithmetic (:mod:`ledger.quotas.usage`) already covers inner nodes; GPU-hours and
cost over a window are :func:`projections.billing.reports.usage_report` and
``cost_report`` grouped by quota (the leaves that ran the occupancies), each inner
node summing its subtree. Added here is only ``lendable`` (:func:`lendable`): what a
node could still lend now, its unused ``min`` not lent outside its subtree yet, within
its ``lend_limit`` (a node never lends beyond it); a root lends to nobody.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from sqlalchemy import Connection

from ledger.dispatch import Admitted
from ledger.dispatch.capacity import Tree
from ledger.dispatch.trees import dispatch_config
from ledger.events import QuotaSpec
from ledger.quotas import (
    QuotaTree,
    lent_outside,
    topological_order,
    unused_offered,
    within_lend_limit,
)
from ledger.usage_boards import Key
from projections.billing import ReportWindow, cost_report, usage_report
from projections.quotas.reads import UsageRow, specs_at, usage_at
from projections.quotas.scope import quota_subtree

__all__ = ["NodeFlavor", "NodeTotals", "QuotaNodes", "available", "lendable", "quota_nodes_at"]

_MGPU_SECONDS_PER_GPU_HOUR = Decimal(1000 * 3600)
_GPU_HOURS_STEP = Decimal("0.000001")
_NO_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)  # admission times play no part here


@dataclass(frozen=True, slots=True)
class NodeFlavor:
    """One node x flavor at an instant: the usage row and what it could still lend."""

    usage: UsageRow
    lendable: int
    #: what one more job could be admitted with here, by the dispatcher's arithmetic
    available: int = 0

    def as_json(self) -> dict[str, Any]:
        out = self.usage.as_json()
        out["lendable"] = self.lendable
        out["available"] = self.available
        out["pending_jobs"] = self.usage.queued_jobs
        return out


@dataclass(frozen=True, slots=True)
class NodeTotals:
    """One node over a window: GPU-hours and cost (minor units per currency) of the
    occupancies its subtree's leaves ran."""

    quota: str
    mgpu_seconds: int = 0
    cost_minor: Mapping[str, int] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> Decimal:
        """To the micro-GPU-hour, half-even (``mgpu_seconds`` is the exact figure)."""
        hours = Decimal(self.mgpu_seconds) / _MGPU_SECONDS_PER_GPU_HOUR
        return hours.quantize(_GPU_HOURS_STEP, ROUND_HALF_EVEN).normalize() + 0


@dataclass(frozen=True, slots=True)
class QuotaNodes:
    """The tree's figures: per node x flavor at ``at``, per node over the window."""

    at: datetime | None
    parents: Mapping[str, str | None]
    flavors: list[NodeFlavor]
    totals: Mapping[str, NodeTotals] | None = None


def lendable(rows: Sequence[UsageRow], specs: Mapping[str, QuotaSpec]) -> dict[Key, int]:
    """What each node x flavor of ``rows`` (every node of the tree at one instant) could
    still lend: what it offers its siblings (:mod:`ledger.quotas.usage`: a leaf's unused
    ``min``; an inner node's unused pool plus its children's lendable unused ``min`` not
    lent among them), within its ``lend_limit``, less what it lends outside its subtree
    already; 0 at a root and off the tree.

    What it lends outside its subtree: :func:`ledger.quotas.lent_outside`.
    """
    by_key = {(r.quota, r.flavor): r for r in rows}
    children: dict[str, list[str]] = defaultdict(list)
    for name, spec in specs.items():
        if spec.parent is not None:
            children[spec.parent].append(name)
    lent_out = lent_outside({n: s.parent for n, s in specs.items()}, by_key)
    out: dict[Key, int] = {}
    offers: dict[Key, int] = {}  # each node's unused within its lend limit
    for name in reversed(topological_order(specs)):  # children before parents
        spec = specs[name]
        for flavor in sorted({f for (q, f) in by_key if q == name}):
            row = by_key[(name, flavor)]
            kids = [by_key[(k, flavor)] for k in children[name] if (k, flavor) in by_key]
            if kids:
                pool = max(0, row.min - sum(k.min for k in kids))
                demand = sum(k.borrowed for k in kids)
                unused = unused_offered(pool, (offers[(k.quota, flavor)] for k in kids), demand)
            else:
                unused = max(0, row.min - (row.used - row.borrowed))
            offer = offers[(name, flavor)] = within_lend_limit(unused, spec.lend_limit.get(flavor))
            up = lent_out[(name, flavor)]
            out[(name, flavor)] = 0 if spec.parent is None else max(0, offer - up)
    return out


def available(rows: Sequence[UsageRow], specs: Mapping[str, QuotaSpec]) -> dict[Key, int]:
    """Kueue's ``available`` per node x flavor of ``rows`` (every node at one instant):
    the dispatcher's capacity arithmetic (:class:`ledger.dispatch.capacity.Tree`) over the
    leaves' usage, so a node's figure is what one more job in its subtree could get now
    (guarantees held back by ``lend_limit`` and caps by ``max`` included; negative when
    over-admitted)."""
    config = dispatch_config(QuotaTree(specs=dict(specs)))
    leaves = frozenset(specs) - {s.parent for s in specs.values() if s.parent is not None}
    tree = Tree(
        config.quotas,
        [
            Admitted(f"{r.quota}/{r.flavor}", r.quota, 0, {r.flavor: r.used}, _NO_INSTANT)
            for r in rows
            if r.quota in leaves and r.used
        ],
    )
    return {
        (r.quota, r.flavor): round(tree.available(r.quota, r.flavor))
        for r in rows
        if r.quota in specs
    }


def quota_nodes_at(
    conn: Connection,
    at: datetime | None = None,
    window: ReportWindow | None = None,
    *,
    workspaces: Collection[str] | None = None,
) -> QuotaNodes:
    """Every node x flavor at ``at`` (latest when None), tree order; with ``window``,
    each node's GPU-hours and cost over it (the billing read model must be current).

    ``workspaces`` (a caller's scope): only the nodes of their subtree
    (:mod:`projections.quotas.scope`) are returned; the figures are still computed over
    the whole tree, as lending and ``available`` depend on the nodes around it."""
    scope = quota_subtree(conn, workspaces)
    nodes = _all_nodes(conn, at, window)
    if scope is None:
        return nodes
    return QuotaNodes(
        nodes.at,
        {q: p for q, p in nodes.parents.items() if q in scope},
        [f for f in nodes.flavors if f.usage.quota in scope],
        None if nodes.totals is None else {q: t for q, t in nodes.totals.items() if q in scope},
    )


def _all_nodes(conn: Connection, at: datetime | None, window: ReportWindow | None) -> QuotaNodes:
    specs = specs_at(conn, at)
    rows = usage_at(conn, at)
    free = lendable(rows, specs)
    room = available(rows, specs)
    flavors = [
        NodeFlavor(r, free.get((r.quota, r.flavor), 0), room.get((r.quota, r.flavor), 0))
        for r in rows
    ]
    stamp = rows[0].at if rows else at
    parents = {name: specs[name].parent for name in topological_order(specs)}
    totals = None if window is None else _window_totals(conn, specs, window)
    return QuotaNodes(stamp, parents, flavors, totals)


def _window_totals(
    conn: Connection, specs: Mapping[str, QuotaSpec], window: ReportWindow
) -> dict[str, NodeTotals]:
    mgpu: dict[str, int] = defaultdict(int)
    for row in usage_report(conn, ["quota"], window):
        mgpu[row["quota"] or ""] += int(row["mgpu_seconds"])
    cost: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in cost_report(conn, ["quota"], window, source="rated"):
        cost[row["quota"] or ""][row["currency"]] += int(row["cost_minor"])
    # a node that cost nothing shows 0 in the window's currency, not a missing amount
    currencies = sorted({c for per in cost.values() for c in per})
    out: dict[str, NodeTotals] = {}
    for name in reversed(topological_order(specs)):  # children before parents
        kids = [c for c, s in specs.items() if s.parent == name]
        seconds = mgpu.get(name, 0) + sum(out[c].mgpu_seconds for c in kids)
        money = {currency: 0 for currency in currencies} | dict(cost.get(name, {}))
        for c in kids:
            for currency, minor in out[c].cost_minor.items():
                money[currency] = money.get(currency, 0) + minor
        out[name] = NodeTotals(name, seconds, dict(sorted(money.items())))
    return {name: out[name] for name in topological_order(specs)}
