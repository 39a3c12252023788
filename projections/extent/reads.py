"""Reading the span and the clock: from the read model alone (bounded: a row per
source), or exactly as the store has it (the read model plus the events it has still to
fold, a range of the store's primary key).

A read never folds anything (reads never write): the exact clock reads the events after
the projection's checkpoint itself, in the same snapshot as the rows and the checkpoint,
which the projector commits together, so the two parts never overlap nor leave a gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

from ledger.events import WATCHER_SOURCE_PREFIX
from ledger.store.base import UnitOfWork
from ledger.store.views import latest_cluster_time_sql
from projections.extent.projection import ExtentProjection
from projections.steps import checkpoint_name

__all__ = ["ProjectedExtent", "observed_clock", "projected_extent"]


@dataclass(frozen=True)
class ProjectedExtent:
    """The store's span as far as the projector has folded it."""

    first: datetime | None  # the earliest occurred_at of a cluster fact
    last: datetime | None  # the latest occurred_at in a job's or node's stream
    watchers: tuple[str, ...]  # the watcher sources (``kube-watcher/<cluster>``), sorted


def projected_extent(conn: Connection) -> ProjectedExtent:
    """The span and the watcher sources as of the extent projection's checkpoint."""
    row = conn.execute(
        text(
            "SELECT min(first_at) AS first, max(last_at) AS last,"
            " array_agg(source ORDER BY source)"
            " FILTER (WHERE first_at IS NOT NULL AND starts_with(source, :prefix)) AS watchers"
            " FROM extent_sources"
        ),
        {"prefix": WATCHER_SOURCE_PREFIX},
    ).one()
    return ProjectedExtent(row.first, row.last, tuple(row.watchers or ()))


def observed_clock(uow: UnitOfWork) -> datetime | None:
    """The latest ``occurred_at`` in a job's or node's stream of the whole store, as
    ``uow`` (a snapshot) sees it: the read model's, or a later one among the events after
    its checkpoint (all of them when it never ran); None when there is none."""
    after = uow.load_checkpoint(checkpoint_name(ExtentProjection())).position
    value = uow.connection.execute(
        text(
            "SELECT greatest((SELECT max(last_at) FROM extent_sources),"
            f" ({latest_cluster_time_sql()}))"
        ),
        {"after": after},
    ).scalar_one()
    return value  # type: ignore[no-any-return]
