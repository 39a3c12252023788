"""Spillover at a replica's start: is its quota's capacity already held?

Billing decides a spilling service's replica's mode when the replica starts, from the quota's
state then (:func:`ledger.quotas.spills`): what the quota's prepaid occupancies hold at that
position of the store, which is the stored rows of earlier pages with this page's starts and
ends applied over them, so a rebuild with any page size decides the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from ledger.events import QuotaSpec
from ledger.quotas import spills

if TYPE_CHECKING:
    from projections.billing.projection import _Page

__all__ = ["spilled"]

_HELD = text(
    "SELECT occupancy_id, flavor, mgpu FROM billing_occupancies "
    "WHERE quota = :q AND billing_mode = 'quota' AND ended_at IS NULL AND mgpu > 0"
)


def spilled(page: _Page, conn: Connection, start: Mapping[str, Any], quota: str | None) -> bool:
    """Whether the occupancy ``start`` (an ``OccupancyStarted``'s data) of quota ``quota``
    runs beyond the quota's capacity (its spec unknown, folded before migration 0024: no)."""
    entry = (page.quotas or {}).get(quota) if quota is not None else None
    if entry is None or entry[2] is None:
        return False
    held: dict[str, tuple[str, int]] = {
        oid: (flavor, int(mgpu)) for oid, flavor, mgpu in conn.execute(_HELD, {"q": quota})
    }
    for oid, (begun, ended) in page.occupancies.items():
        if ended is not None:
            held.pop(oid, None)
        elif begun is not None and begun[2] == quota and begun[8] == "quota":
            held[oid] = (begun[4], begun[5])
    spec = QuotaSpec.model_validate(entry[2])
    return spills(spec, start.get("flavor", "gpu/any"), int(start["mgpu"]), held.values())
