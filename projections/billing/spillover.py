"""Spillover at a replica's start: is its quota's capacity already held?

Billing decides a spilling service's replica's mode when the replica starts, from the quota's
state then (:func:`ledger.quotas.spills`): what the prepaid occupancies of the quota and the
quotas below it hold at that position of the store, which is the stored rows of earlier
pages with this page's starts and ends applied over them, so a rebuild with any page size
decides the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from ledger.events import QuotaSpec
from ledger.quotas import spills

if TYPE_CHECKING:
    from projections.billing.projection import Quota, _Page

__all__ = ["spilled"]

_HELD = text(
    "SELECT occupancy_id, flavor, mgpu FROM billing_occupancies "
    "WHERE quota = ANY(:q) AND billing_mode = 'quota' AND ended_at IS NULL AND mgpu > 0"
)


def _subtree(quotas: Mapping[str, Quota | None], root: str) -> set[str]:
    """``root`` and every quota below it (a service on an inner quota, as in the
    platform's integrated example, shares its pool with its children's training)."""
    children: dict[str, list[str]] = {}
    for name, entry in quotas.items():
        if entry is not None and entry[0] is not None:
            children.setdefault(entry[0], []).append(name)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def spilled(page: _Page, conn: Connection, start: Mapping[str, Any], quota: str | None) -> bool:
    """Whether the occupancy ``start`` (an ``OccupancyStarted``'s data) of quota ``quota``
    runs beyond the quota's capacity (its spec unknown, folded before migration 0024: no)."""
    if quota is None:
        return False
    entry = (page.quotas or {}).get(quota)
    if entry is None or entry[2] is None:
        return False
    pool = _subtree(page.quotas or {}, quota)
    held: dict[str, tuple[str, int]] = {
        oid: (flavor, int(mgpu)) for oid, flavor, mgpu in conn.execute(_HELD, {"q": sorted(pool)})
    }
    for oid, (begun, ended) in page.occupancies.items():
        if ended is not None:
            held.pop(oid, None)
        elif begun is not None and begun[2] in pool and begun[8] == "quota":
            held[oid] = (begun[4], begun[5])
    spec = QuotaSpec.model_validate(entry[2])
    return spills(spec, start.get("flavor", "gpu/any"), int(start["mgpu"]), held.values())
