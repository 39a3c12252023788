"""``dlc-ledger demo``: the main job on embedded defaults.

Until the replay pipeline lands this exercises the store end to end: migrate the
embedded database, append a batch of occupancy events, read it back, verify the chain.
"""

from __future__ import annotations

from datetime import timedelta

import typer

from consumers import context
from ledger.canonical import parse_timestamp
from ledger.envelopes import make_envelope
from ledger.events import OccupancyStarted
from ledger.ids import fact_event_id

__all__ = ["run_demo"]


def run_demo(*, fresh: bool = False) -> None:
    store = context.open_store()
    epoch = parse_timestamp(context.settings().epoch)
    batch = []
    for n in range(1000):
        at = epoch + timedelta(seconds=n)
        batch.append(
            make_envelope(
                OccupancyStarted(
                    occupancy_id=f"demo-pod-{n}",
                    job_uid=f"demo-job-{n}",
                    pod_uid=f"demo-pod-{n}",
                    mgpu=1000,
                    cpu_milli=8000,
                    memory_mib=16384,
                    workspace="ws-demo",
                    started_at=at,
                ),
                event_id=fact_event_id("demo", "Pod", f"demo-pod-{n}", "started"),
                stream=f"job/demo-job-{n}",
                occurred_at=at,
                observed_at=at,
                source="demo",
            )
        )
    result = store.append(batch)
    typer.echo(f"appended {len(result.positions)} events ({len(result.duplicates)} already stored)")
    typer.echo(f"store head position: {store.head_position()}")
    verdict = store.verify()
    state = "intact" if verdict.ok else verdict.detail
    typer.echo(f"hash chain: {state} ({verdict.checked} events)")
