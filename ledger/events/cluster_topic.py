"""What the cluster topic may carry: the cluster facts a watcher emits, checked at ingest."""

from __future__ import annotations

from ledger.envelopes import Envelope, EventDecodeError
from ledger.events.jobs import (
    JOB_LIFECYCLE_TYPES,
)
from ledger.events.workloads import WORKLOAD_TYPES

__all__ = [
    "CLUSTER_FACT_TYPES",
    "WATCHER_SOURCE_PREFIX",
    "NotAClusterFact",
    "NotFromAWatcher",
    "WrongStream",
    "check_cluster_fact",
]


#: The facts a cluster watcher observes (job and workload lifecycles, occupancy, nodes): the
#: only event types the cluster topic carries. Prices, quotas, money, invoices, decisions and
#: budgets enter the store only through the product's own commands. docs/wire-format.md.
CLUSTER_FACT_TYPES: frozenset[str] = (
    JOB_LIFECYCLE_TYPES
    | WORKLOAD_TYPES
    | {
        "OccupancyStarted",
        "OccupancyEnded",
        "NodeRegistered",
        "NodeCordoned",
        "NodeRemoved",
    }
)
#: The ``source`` of every watcher's events: ``kube-watcher/<cluster>``.
WATCHER_SOURCE_PREFIX = "kube-watcher/"


class NotAClusterFact(EventDecodeError):
    reason = "not-a-cluster-fact"


class NotFromAWatcher(EventDecodeError):
    reason = "not-from-a-watcher"


class WrongStream(EventDecodeError):
    reason = "wrong-stream"


def check_cluster_fact(envelope: Envelope) -> None:
    """Refuse what a watcher cannot have sent: another type, source, or another stream.

    A job's facts live in ``job/<job_uid>``, a node's in ``node/<node>`` (as the watcher
    writes them), so a message cannot slip a fact into another job's or node's history.
    """
    if envelope.type not in CLUSTER_FACT_TYPES:
        raise NotAClusterFact(f"{envelope.type} is not a cluster fact: only commands write it")
    if not envelope.source.startswith(WATCHER_SOURCE_PREFIX):
        raise NotFromAWatcher(
            f"source {envelope.source!r} is not a watcher's ({WATCHER_SOURCE_PREFIX}<cluster>)"
        )
    if envelope.type.startswith("Node"):
        expected = f"node/{envelope.data.get('node')}"
    else:
        expected = f"job/{envelope.data.get('job_uid')}"
    if envelope.stream != expected:
        raise WrongStream(f"{envelope.type} of stream {envelope.stream!r}, expected {expected!r}")
