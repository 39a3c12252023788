"""The cluster as it was: nodes and their pools, groups and flavors over time
(``projection``), and which pod occupied what, where, when (``occupancy``)."""

from __future__ import annotations

from projections.inventory.occupancy import jobs_holding_at
from projections.inventory.occupancy import occupancy as occupancy_table
from projections.inventory.projection import capacity_at

__all__ = ["capacity_at", "jobs_holding_at", "occupancy_table"]
