"""Builders of realistic test events (shaped like the watcher's occupancy events)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from ledger.envelopes import Envelope, make_envelope
from ledger.events import JobSucceeded, OccupancyStarted
from ledger.ids import fact_event_id

__all__ = ["EPOCH", "job_succeeded", "occupancy_started"]

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def occupancy_started(
    n: int,
    *,
    job: str | None = None,
    workspace: str = "ws-ls",
    mgpu: int = 1000,
    at: datetime | None = None,
    event_id: uuid.UUID | None = None,
) -> Envelope:
    job_uid = job or f"job-{n}"
    started = at or EPOCH + timedelta(seconds=n)
    data = OccupancyStarted(
        occupancy_id=f"pod-{n}",
        job_uid=job_uid,
        pod_uid=f"pod-{n}",
        pod_name=f"openb-pod-{n:04d}",
        node=f"openb-node-{n % 1523:04d}",
        mgpu=mgpu,
        cpu_milli=8000,
        memory_mib=16384,
        workspace=workspace,
        started_at=started,
    )
    return make_envelope(
        data,
        event_id=event_id or fact_event_id("test", "Pod", f"pod-{n}", "started"),
        stream=f"job/{job_uid}",
        occurred_at=started,
        observed_at=started,
        source="kube-watcher/test",
    )


def job_succeeded(n: int, *, job: str | None = None) -> Envelope:
    job_uid = job or f"job-{n}"
    at = EPOCH + timedelta(seconds=n)
    return make_envelope(
        JobSucceeded(job_uid=job_uid),
        event_id=fact_event_id("test", "Job", job_uid, "succeeded"),
        stream=f"job/{job_uid}",
        occurred_at=at,
        observed_at=at,
        source="kube-watcher/test",
    )
