"""The cluster as it was: nodes and their pools, groups and flavors over time
(``projection``), and which pod occupied what, where, when (``occupancy``)."""

from __future__ import annotations

from projections.inventory.occupancy import (
    GROUP_KEYS,
    OccupancyProjection,
    jobs_holding_at,
    occupied_at,
)
from projections.inventory.occupancy import occupancy as occupancy_table
from projections.inventory.projection import (
    INVENTORY_GROUP_KEYS,
    InventoryProjection,
    capacity_at,
)

__all__ = [
    "GROUP_KEYS",
    "INVENTORY_GROUP_KEYS",
    "InventoryProjection",
    "OccupancyProjection",
    "capacity_at",
    "jobs_holding_at",
    "occupancy_table",
    "occupied_at",
]
