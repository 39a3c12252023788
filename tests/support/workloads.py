"""A service, a notebook and a training job in one workspace, projected (issue 46): the
service scaled from 1 to 2 replicas at 600 s by ``eas-autoscaler`` and deleted at 3600 s,
6,600 GPU-seconds at 3.60 USD an hour (6.60 USD)."""

from __future__ import annotations

from decimal import Decimal

from consumers.projector import Projector
from ledger.events import (
    JobSubmitted,
    OccupancyEnded,
    OccupancyStarted,
    PriceBookPublished,
    Rates,
    WorkloadCreated,
    WorkloadDeleted,
    WorkloadScaled,
)
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at, replica

__all__ = ["service_world", "tell_workloads"]


def _occupy(n: Narrator, uid: str, pod: str, start: int, end: int) -> None:
    n.tell(
        OccupancyStarted(
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            pod_name=pod,
            node="n1",
            mgpu=1000,  # GPU only: the book prices GPUs alone
            cpu_milli=0,
            memory_mib=0,
            workspace="ws-a",
            quota="team-a",
            started_at=at(start),
        ),
        f"job/{uid}",
        at(start),
    )
    n.tell(
        OccupancyEnded(occupancy_id=pod, job_uid=uid, pod_uid=pod, ended_at=at(end)),
        f"job/{uid}",
        at(end),
    )


def service_world(store: PostgresEventStore) -> None:
    n = Narrator()
    n.tell(
        PriceBookPublished(
            book_id="b1",
            currency="USD",
            scale=2,
            effective_from=EPOCH,
            rates=Rates(public={"gpu/any": Decimal("3.60")}),
            idle_multiplier=Decimal("0.3"),
        ),
        "pricebook/b1",
        EPOCH,
        source="api/test",
    )
    tell_workloads(n)
    store.append(n.events)
    Projector(store, all_projections()).catch_up()


def tell_workloads(n: Narrator) -> None:
    """The service, the notebook and the training job, without a price book."""
    n.tell(
        WorkloadCreated(
            job_uid="svc",
            name="ranker",
            namespace="ns1",
            workload="service",
            kind="Deployment",
            workspace="ws-a",
            quota="team-a",
            user="alice",
            replicas=1,
            replica=replica(),
            revision="r1",
        ),
        "job/svc",
        at(0),
    )
    _occupy(n, "svc", "ranker-0", 0, 3600)
    n.tell(
        WorkloadScaled(job_uid="svc", from_replicas=1, to_replicas=2, by="eas-autoscaler"),
        "job/svc",
        at(600),
    )
    _occupy(n, "svc", "ranker-1", 600, 3600)
    n.tell(WorkloadDeleted(job_uid="svc"), "job/svc", at(3600))
    n.tell(
        WorkloadCreated(
            job_uid="nb",
            name="dsw-bob",
            workload="notebook",
            kind="StatefulSet",
            workspace="ws-a",
            replica=replica(),
        ),
        "job/nb",
        at(10),
    )
    n.tell(
        JobSubmitted(job_uid="train", name="bert", workspace="ws-a", replicas=(replica(),)),
        "job/train",
        at(20),
    )
