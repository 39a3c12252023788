"""The span of cluster time the store holds and the sources it came from, one row per
source (``projection``), so ``/v1/extent`` and the cluster clock read a handful of rows
instead of scanning every event (``reads``)."""

from __future__ import annotations

from projections.extent.projection import ExtentProjection, extent_sources
from projections.extent.reads import ProjectedExtent, observed_clock, projected_extent

__all__ = [
    "ExtentProjection",
    "ProjectedExtent",
    "extent_sources",
    "observed_clock",
    "projected_extent",
]
