"""A small cluster whose jobs' costs round differently one by one than summed, for the
dashboard's finance routes (``/v1/cost/top``, ``/v1/month-to-date``, ``/v1/budgets``)
and the figures of ``/v1/jobs``.

At the demo price book's public rate (2.40 USD per GPU-hour: 1/15 cent per GPU-second):
three jobs of 6 GPU-seconds cost 0.4 cent each (0 cents rounded one by one, 1 cent
summed), one of an hour 2.40 USD, and one of half an hour in workspace B 1.20 USD:
361.2 cents in all (361 rounded once; 360 as a sum of the jobs' roundings). Billed by a
tick on 2 November, so the ledger holds it and November is still open (no invoice).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.yaml_files import load_price_book
from ledger.events import JobStarted, JobSubmitted, OccupancyEnded, OccupancyStarted, ReplicaSpec
from ledger.store.postgres import PostgresEventStore
from tests.support.builders import EPOCH, Narrator, at
from tests.support.demo_files import DEMO_PRICE_BOOK

__all__ = ["BILLED", "JOBS", "TOTAL_MINOR", "seed_costs"]

#: uid -> (workspace, user, name, seconds of one GPU, replica flavor, count, node flavor)
JOBS: dict[str, tuple[str, str, str, int, str, int, str]] = {
    "t-1": ("ws-a", "alice", "resnet one", 6, "gpu/any", 1, "gpu/any"),
    "t-2": ("ws-a", "alice", "Resnet two", 6, "gpu/any", 1, "gpu/any"),
    "t-3": ("ws-a", "alice", "bert_3", 6, "gpu/any", 1, "gpu/any"),
    "t-big": ("ws-a", "bob", "LLaMA big", 3600, "gpu/A100", 2, "gpu/any"),
    "u-1": ("ws-b", "carol", "llama u", 1800, "gpu/any", 1, "gpu/T4"),
}
TOTAL_MINOR = 361  # 361.2 cents, rounded once
BILLED = EPOCH + timedelta(days=1)


def seed_costs(store: PostgresEventStore, *, source: str = "kube-watcher/test") -> datetime:
    """The jobs of :data:`JOBS`, priced and billed; returns the latest instant told."""
    n = Narrator("finance")
    latest = EPOCH
    for i, (uid, (ws, user, name, seconds, flavor, count, node)) in enumerate(JOBS.items()):
        start = at(60 * i)
        end = start + timedelta(seconds=seconds)
        latest = max(latest, end)
        spec = ReplicaSpec(count=count, flavor=flavor, mgpu=1000, cpu_milli=0, memory_mib=0)
        n.tell(
            JobSubmitted(
                job_uid=uid, name=name, workspace=ws, quota=f"q-{ws}", user=user, replicas=(spec,)
            ),
            f"job/{uid}",
            start,
            source=source,
        )
        n.tell(JobStarted(job_uid=uid), f"job/{uid}", start, source=source)
        pod = f"pod-{uid}"
        n.tell(
            OccupancyStarted(
                occupancy_id=pod,
                job_uid=uid,
                pod_uid=pod,
                pod_name=pod,
                node="node-1",
                flavor=node,
                mgpu=1000,
                cpu_milli=0,
                memory_mib=0,
                workspace=ws,
                quota=f"q-{ws}",
                user=user,
                started_at=start,
            ),
            f"job/{uid}",
            start,
            source=source,
        )
        n.tell(
            OccupancyEnded(occupancy_id=pod, job_uid=uid, pod_uid=pod, ended_at=end),
            f"job/{uid}",
            end,
            source=source,
        )
    publish_price_book(store, load_price_book(DEMO_PRICE_BOOK), at=EPOCH)
    store.append(n.events)
    tick(store, BILLED)  # rates what ended, brings every read model to the head
    return latest
