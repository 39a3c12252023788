"""Replay a public GPU trace through the whole pipeline: kubesim → watchers → Kafka → store.

Nothing is short-circuited: kubesim serves the trace over the Kubernetes API on a virtual
clock, the real watchers list and watch it with the official client and publish through the
producer to Kafka, the ingest consumer appends to PostgreSQL exactly once, and the projector
brings the read models up to date. The run ends once every trace action was observed,
published, ingested and projected, and checks the store against the trace (one
OccupancyStarted per scheduled pod, one OccupancyEnded per deleted scheduled pod; for an
open loop, each workspace's usage and each service's replica-seconds to the second).

A closed loop may continue a history (``run_replay(..., closed_loop=True, live_from=...)``):
the rows created before ``live_from`` play open loop with no dispatcher and are checked
against the trace up to it, the others arrive suspended for the live dispatcher, in one
database (docs/dispatch.md, "History, then live").

A replay is reproducible: kubesim derives UIDs from the trace, timestamps come from the
virtual clock and event ids are deterministic, so replaying again into the same database adds
nothing. Each database gets its own replay topic (remembered in the database), so a ``--fresh``
database never ingests a previous run's messages.

Modules: :mod:`~.run` (``run_replay``: the steps in order, the trace to play),
:mod:`~.database` (reset, migration, the replay topic), :mod:`~.reference_data` (the price
book and quota tree applied at the epoch), :mod:`~.pipeline` (kubesim, watcher, producer and
ingest wired and waited for), :mod:`~.verify` (the summary, the store checked against the
trace).
"""

from dlc_ledger.wiring.replay.demo_world import (
    DEMO_WINDOW,
    LIVE_SERVICE,
    DemoWorld,
    add_inference,
    demo_world,
    live_tree,
)
from dlc_ledger.wiring.replay.run import COMBINED, cluster_name, load_replay_trace, run_replay
from dlc_ledger.wiring.replay.verify import ReplaySummary, StoreCounts

__all__ = [
    "COMBINED",
    "DEMO_WINDOW",
    "LIVE_SERVICE",
    "DemoWorld",
    "ReplaySummary",
    "StoreCounts",
    "add_inference",
    "cluster_name",
    "demo_world",
    "live_tree",
    "load_replay_trace",
    "run_replay",
]
