"""The service view's data (docs/workloads.md): no replay, a few events.

- ``ns1/ranker`` (tests/support/workloads.py, ``tell_workloads``): one replica at 0 s,
  scaled to 2 at 600 s by ``eas-autoscaler``, deleted at 3600 s, in ``ws-a``; with it a
  notebook (:data:`NOTEBOOK`, its one pod for two hours) and a training job;
- ``ns2/search`` (:data:`SPILLING`): a service labelled ``dlc.ledger/spillover: public``
  in ``ws-sub``, whose replicas of 8 GPUs run on a 16-GPU quota drawing on two subscribed
  nodes: the first two are prepaid (billing mode ``quota``), the third spills onto public
  resources (``public``), across midnight, so its cost per day shows both modes on two
  days.

The demo price book, billed to a month after (the ledger's cost, the lists' ``cost``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from consumers.projector import Projector
from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import purchase
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import WorkloadCreated, WorkloadDeleted, WorkloadScaled
from ledger.ids import deterministic_id
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.billing import at, demo_book, ended, started
from tests.support.builders import Narrator, replica
from tests.support.workloads import tell_workloads

__all__ = ["NOTEBOOK", "SPILLING", "SPILL_START", "seed"]

#: the notebook's uid (tell_workloads': dsw-bob)
NOTEBOOK = "nb"

#: the spilling service's uid
SPILLING = "svc-search"
#: its creation: an hour before midnight
SPILL_START = at("2027-01-03T23:00")

TREE = """
quotas:
  - name: root
    min: {gpu/any: 16000}
    resource_groups: [gpu-g2]
  - name: team
    parent: root
    min: {gpu/any: 16000}
    workspaces: [ws-sub]
"""


def _spilling(store: PostgresEventStore) -> None:
    t0, minute = SPILL_START, timedelta(minutes=1)

    def told(data: EventData, when: datetime, key: str) -> Envelope:
        return make_envelope(
            data,
            event_id=deterministic_id("dashboard-services", key),
            stream=f"job/{SPILLING}",
            occurred_at=when,
            observed_at=when,
            source="kube-watcher/dashboard-test",
        )

    created = WorkloadCreated(
        job_uid=SPILLING,
        name="search",
        namespace="ns2",
        workload="service",
        kind="Deployment",
        workspace="ws-sub",
        user="carol",
        replicas=1,
        replica=replica(mgpu=8000, cpu_milli=0, memory_mib=0),
        revision="s1",
        spillover="public",
    )
    timed = [
        (t0, told(created, t0, "created")),
        (
            t0 + minute,
            told(
                WorkloadScaled(
                    job_uid=SPILLING, from_replicas=1, to_replicas=3, by="eas-autoscaler"
                ),
                t0 + minute,
                "scaled-3",
            ),
        ),
        (
            t0 + 62 * minute,
            told(
                WorkloadScaled(
                    job_uid=SPILLING, from_replicas=3, to_replicas=2, by="eas-autoscaler"
                ),
                t0 + 62 * minute,
                "scaled-2",
            ),
        ),
        (t0 + 120 * minute, told(WorkloadDeleted(job_uid=SPILLING), t0 + 120 * minute, "deleted")),
    ]
    # r1 and r2 fill the quota's 16 GPUs (prepaid); r3, while they hold it, spills
    pods = {
        "search-1": (t0, t0 + 120 * minute),
        "search-2": (t0 + 2 * minute, t0 + 120 * minute),
        "search-3": (t0 + 3 * minute, t0 + 62 * minute),
    }
    for pod, (a, b) in pods.items():
        timed += [
            (a, started(pod, a, job=SPILLING, workspace="ws-sub", mgpu=8000)),
            (b, ended(pod, b, job=SPILLING)),
        ]
    store.append([e for _, e in sorted(timed, key=lambda pair: pair[0])])


def seed(store: PostgresEventStore) -> None:
    """Both services (and the notebook and the job), projected and billed."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    n = Narrator("dashboard-services")
    tell_workloads(n)
    store.append(n.events)
    notebook = at("2026-11-01T00:00") + timedelta(seconds=10)
    store.append(
        [
            started("dsw-bob-0", notebook, job=NOTEBOOK, cpu_milli=4000),
            ended("dsw-bob-0", notebook + timedelta(hours=2), job=NOTEBOOK),
        ]
    )
    purchase(
        store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=2, term="year", workspace="ws-sub",
        principal="test", at=at("2027-01-01T00:00"), key="dashboard-services",
    )  # fmt: skip
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"))
    _spilling(store)
    tick(store, at("2027-02-03T00:00"))
    Projector(store, all_projections()).catch_up()
