"""Every projection the runner drives, in one list.

``dlc-ledger project`` / ``projections rebuild|status`` and the benchmark build
exactly these. Adding a read model is a one-line edit here (plus its migration).
"""

from __future__ import annotations

from ledger.errors import NotFound
from ledger.store.base import EventStore
from projections.base import Projection
from projections.billing import BillingProjection
from projections.budgets import BudgetsProjection
from projections.dispatch import DispatchDecisionsProjection
from projections.extent import ExtentProjection
from projections.inventory import InventoryProjection, OccupancyProjection
from projections.jobs import JobsProjection
from projections.quotas import QuotaProjection
from projections.steps import catch_up

__all__ = ["all_projections", "projection_named"]


def all_projections() -> list[Projection]:
    """A fresh instance of every registered projection, in run order."""
    return [
        JobsProjection(),
        OccupancyProjection(),
        InventoryProjection(),
        QuotaProjection(),
        BillingProjection(),
        BudgetsProjection(),
        DispatchDecisionsProjection(),
        ExtentProjection(),
    ]


def projection_named(name: str) -> Projection:
    """The registered projection called ``name``; a ValueError names the known ones."""
    found = {p.name: p for p in all_projections()}
    if name not in found:
        raise NotFound(f"no projection named {name!r}; known: {', '.join(sorted(found))}")
    return found[name]


def catch_up_all(store: EventStore) -> int:
    """Every projection to the store's head: what a write use case runs after its append, so
    every read after it is current (a read never runs it), positions covered returned."""
    return catch_up(store, all_projections())
