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

Read from the ``extent`` read model (:mod:`projections.extent`, a row per source), as of
its checkpoint like every read (the response's freshness says how far that is behind):
a few rows, where the same figures from the events were a scan of the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ledger.events import WATCHER_SOURCE_PREFIX
from ledger.store.base import EventStore
from projections.extent import projected_extent

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
    """The store's cluster-time span and the clusters its facts came from, as projected."""
    with store.reading() as conn:
        found = projected_extent(conn)
    clusters = tuple(sorted(s[len(WATCHER_SOURCE_PREFIX) :] for s in found.watchers))
    return Extent(
        first=found.first,
        last=found.last,
        replayed=any(c.startswith(REPLAY_CLUSTER_PREFIX) for c in clusters),
        clusters=clusters,
    )
