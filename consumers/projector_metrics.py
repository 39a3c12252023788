"""Prometheus metrics of the projector: positions applied and lag per projection.

Lag is exact (store head minus the projection's checkpoint, both read from
PostgreSQL), refreshed after every catch-up of a following runner, so an idle runner
reports 0 and a stalled one a growing number.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import Counter, Gauge

__all__ = ["PROJECTED", "PROJECTION_LAG", "record_status"]

PROJECTED = Counter(
    "dlc_projector_positions_total", "Store positions applied by the projector (all projections)"
)
PROJECTION_LAG = Gauge(
    "dlc_projection_lag_events",
    "Events in the store a projection has not applied yet (head - checkpoint)",
    ["projection"],
)


class _Status(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def lag(self) -> int: ...


def record_status(covered: int, statuses: Iterable[_Status]) -> None:
    """Count ``covered`` positions applied and set each projection's lag."""
    PROJECTED.inc(covered)
    for status in statuses:
        PROJECTION_LAG.labels(status.name).set(status.lag)
