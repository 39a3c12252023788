"""Synthetic events shaped like the watcher's occupancy events (a few hundred bytes each)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ledger.envelopes import Envelope, make_envelope
from ledger.events import OccupancyStarted
from ledger.ids import fact_event_id

__all__ = ["EPOCH", "occupancy_started"]

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def occupancy_started(n: int, *, job: str) -> Envelope:
    started = EPOCH + timedelta(seconds=n)
    data = OccupancyStarted(
        occupancy_id=f"pod-{n}",
        job_uid=job,
        pod_uid=f"pod-{n}",
        pod_name=f"openb-pod-{n:06d}",
        node=f"openb-node-{n % 1523:04d}",
        mgpu=1000,
        cpu_milli=8000,
        memory_mib=16384,
        workspace="ws-ls",
        started_at=started,
    )
    return make_envelope(
        data,
        event_id=fact_event_id("bench", "Pod", f"pod-{n}", "started"),
        stream=f"job/{job}",
        occurred_at=started,
        observed_at=started,
        source="kube-watcher/bench",
    )
