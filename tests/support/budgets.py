"""Builders for the budget tests: jobs and their pods in the store, cost posted by billing ticks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from consumers.projector import Projector
from dlc_ledger.services.billing import publish_price_book, tick
from ledger.envelopes import Envelope, make_envelope
from ledger.events import (
    BillingMode,
    JobAdmitted,
    JobQueued,
    JobSubmitted,
    JobSucceeded,
    ReplicaSpec,
)
from ledger.store.postgres import PostgresEventStore
from projections.registry import all_projections
from tests.support.billing import demo_book, ended, started

__all__ = [
    "EPOCH",
    "at",
    "budget_file",
    "job",
    "pending_job",
    "post_cost",
    "project",
    "publish_prices",
]

#: The demo book's rates: public GPU-hour 2.40, spot 0.90, quota 0 (USD, scale 2).
EPOCH = datetime(2026, 11, 5, tzinfo=UTC)


def at(hours: float) -> datetime:
    return EPOCH + timedelta(hours=hours)


def publish_prices(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=datetime(2026, 10, 1, tzinfo=UTC))


def _job_envelope(
    data: JobSubmitted | JobSucceeded | JobQueued | JobAdmitted, uid: str, when: datetime
) -> Envelope:
    return make_envelope(
        data,
        event_id=uuid.uuid4(),
        stream=f"job/{uid}",
        occurred_at=when,
        observed_at=when,
        source="kube-watcher/test",
    )


def job(
    store: PostgresEventStore,
    uid: str,
    workspace: str,
    mode: BillingMode,
    start: datetime,
    end: datetime | None = None,
    *,
    kind: str = "PyTorchJob",
) -> None:
    """A submitted job whose one pod (1 GPU) runs from ``start`` (to ``end``, succeeded)."""
    submitted = JobSubmitted(
        job_uid=uid,
        name=f"{uid}-name",
        namespace=f"ns-{workspace}",
        kind=kind,
        workspace=workspace,
        billing_mode=mode,
        quota="q-sub" if mode == "quota" else None,
        replicas=(ReplicaSpec(count=1, mgpu=1000, cpu_milli=0, memory_mib=0),),
    )
    events = [
        _job_envelope(submitted, uid, start - timedelta(minutes=1)),
        started(
            f"pod-{uid}",
            start,
            workspace=workspace,
            job=uid,
            mode=mode,
            quota="q-sub" if mode == "quota" else None,
        ),
    ]
    if end is not None:
        events += [
            ended(f"pod-{uid}", end, job=uid),
            _job_envelope(JobSucceeded(job_uid=uid), uid, end),
        ]
    store.append(events)


def pending_job(
    store: PostgresEventStore, uid: str, workspace: str, when: datetime, *, admitted: bool
) -> None:
    """A public job with no pod yet: queued (suspended), or admitted (resumed, not bound)."""
    submitted = JobSubmitted(
        job_uid=uid,
        name=f"{uid}-name",
        namespace=f"ns-{workspace}",
        workspace=workspace,
        replicas=(ReplicaSpec(count=1, mgpu=1000, cpu_milli=0, memory_mib=0),),
    )
    events = [
        _job_envelope(submitted, uid, when),
        _job_envelope(JobQueued(job_uid=uid), uid, when),
    ]
    if admitted:
        events.append(_job_envelope(JobAdmitted(job_uid=uid), uid, when + timedelta(minutes=1)))
    store.append(events)


def post_cost(store: PostgresEventStore, hours: range) -> None:
    """Billing ticks at each hour of ``hours`` after the epoch: cost posted hour by hour."""
    for h in hours:
        tick(store, at(h))


def project(store: PostgresEventStore) -> None:
    Projector(store, all_projections()).catch_up()


def budget_file(tmp_path: Path, text: str, name: str = "budgets.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path
