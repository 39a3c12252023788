"""Quota figures shaped as rows, one shape for ``quotas tree|show``, ``report
quota-usage|quota-history|quota-series`` and the API's ``/v1/quotas`` routes.

The reads (:mod:`projections.quotas.reads`, :mod:`projections.quotas.nodes`) return
typed figures; here they become the flat rows both front ends print or serve, so a
column added or renamed changes the CLI and the API together.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ledger.canonical import format_timestamp
from ledger.errors import Invalid
from ledger.quotas import resource_unit
from ledger.usage_boards import NUMBERS
from projections.quotas import KINDS, NodeFlavor, QuotaNodes, UsageRow

__all__ = [
    "NODE_KEYS",
    "USAGE_KEYS",
    "node_row",
    "series_row",
    "usage_json",
    "usage_table",
    "with_kinds",
]

USAGE_KEYS = ("quota", "flavor", *NUMBERS)
NODE_KEYS = ("quota", "parent", "flavor", "min", "max", "used", "borrowed", "lent", "lendable",
             "available", "queued", "pending_jobs", "running_jobs", "over_admitted")  # fmt: skip


def usage_json(row: dict[str, Any]) -> dict[str, Any]:
    """A usage row (``UsageRow.as_json()``) for machines: its unit and instant added."""
    out = {k: row[k] for k in USAGE_KEYS}
    out["unit"] = resource_unit(row["flavor"]) if row["flavor"] else ""
    out["at"] = format_timestamp(row["at"])
    return out


def usage_table(row: dict[str, Any]) -> dict[str, Any]:
    """A usage row for a table: its unit added, the instant left to the caller."""
    out = {k: row[k] for k in USAGE_KEYS}
    out["unit"] = resource_unit(row["flavor"])
    return out


def with_kinds(row: dict[str, Any], kinds: dict[str, int]) -> dict[str, Any]:
    """A node x flavor row with its ``used`` split by kind (``projections.quotas.kinds``):
    ``used_training``, ``used_service``, ``used_notebook``, after ``used``."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        out[key] = value
        if key == "used":
            for kind in KINDS:
                out[f"used_{kind}"] = kinds.get(kind, 0)
    return out


def series_row(row: UsageRow) -> dict[str, Any]:
    """One point of a quota's series: the instant first, queued jobs named as pending."""
    out = {"at": format_timestamp(row.at), **usage_json(row.as_json())}
    out["pending_jobs"] = out.pop("queued_jobs")
    return out


def node_row(nodes: QuotaNodes, flavor: NodeFlavor, *, with_at: bool) -> dict[str, Any]:
    """One node x flavor of the quota tree; with the window's GPU-hours and cost (in
    minor units and its currency) when ``nodes`` has totals. ``with_at``: add the
    instant (machines; a table shows it once, not per row)."""
    figures = flavor.as_json()
    row: dict[str, Any] = {"parent": nodes.parents.get(flavor.usage.quota), **figures}
    row = {k: row[k] for k in NODE_KEYS}
    row["unit"] = resource_unit(flavor.usage.flavor) if flavor.usage.flavor else ""
    if with_at:
        row["at"] = format_timestamp(flavor.usage.at)
    if nodes.totals is not None:
        totals = nodes.totals.get(flavor.usage.quota)
        row["mgpu_seconds"] = totals.mgpu_seconds if totals else 0
        row["gpu_hours"] = totals.gpu_hours if totals else Decimal(0)
        costs = dict(totals.cost_minor) if totals else {}
        if len(costs) > 1:
            raise Invalid(
                f"quota {flavor.usage.quota!r} has cost in several currencies "
                f"({', '.join(costs)}): use report cost --group-by quota"
            )
        currency, minor = next(iter(costs.items()), (None, None))
        row["cost_minor"] = minor
        row["currency"] = currency
    return row
