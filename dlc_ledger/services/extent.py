"""What span of cluster time the store holds, and where it came from (``/v1/extent``):
so a dashboard opens on the data there is (a replay's history lies months away from
the wall clock) and can say it is a replay.

- ``first``: the earliest ``occurred_at`` of a cluster fact (what a watcher reports:
  job lifecycle, occupancy, nodes); ``last``: the latest of a job's or a node's stream,
  the billing runs' observed cluster clock
  (:func:`dlc_ledger.services.clocks.observed_cluster_time`);
- ``clusters``: the clusters whose watchers stored facts (their events' source is
  ``kube-watcher/<cluster>``);
- ``replayed``: one of them is a replay's (``dlc-ledger replay`` and ``up`` name the
  cluster ``replay-<trace>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from ledger.events import CLUSTER_FACT_TYPES, WATCHER_SOURCE_PREFIX
from ledger.store.base import EventStore
from ledger.store.views import latest_cluster_time_sql, typed_events

__all__ = ["REPLAY_CLUSTER_PREFIX", "Extent", "data_extent"]

#: how a replay names the cluster it plays (``replay-<trace>``)
REPLAY_CLUSTER_PREFIX = "replay-"


@dataclass(frozen=True)
class Extent:
    first: datetime | None
    last: datetime | None
    replayed: bool
    clusters: tuple[str, ...]


def data_extent(store: EventStore) -> Extent:
    """The store's cluster-time span and the clusters its facts came from."""
    facts = typed_events(*sorted(CLUSTER_FACT_TYPES))
    with store.reading() as conn:
        row = conn.execute(
            text(
                f"SELECT ({latest_cluster_time_sql()}) AS last, min(occurred_at) AS first,"
                " array_agg(DISTINCT source) FILTER (WHERE starts_with(source, :prefix))"
                f" AS sources FROM {facts} f"
            ),
            {"prefix": WATCHER_SOURCE_PREFIX},
        ).one()
    clusters = tuple(sorted(s[len(WATCHER_SOURCE_PREFIX) :] for s in row.sources or ()))
    return Extent(
        first=row.first,
        last=row.last,
        replayed=any(c.startswith(REPLAY_CLUSTER_PREFIX) for c in clusters),
        clusters=clusters,
    )
