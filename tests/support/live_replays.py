"""A closed-loop replay of history then live, as the live-continuation and live-services
tests run it (demo price book, a tree of their own, the real pipeline and dispatcher), and
the events it stored."""

from __future__ import annotations

import time
from datetime import datetime
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from sqlalchemy import select

from dlc_ledger.wiring.replay import ReplaySummary, run_replay
from kubesim.traces import Trace
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table

__all__ = ["replay_closed_loop", "stored_events"]


def stored_events(store: PostgresEventStore, *types: str) -> list[Any]:
    """The stored events of ``types`` (type, occurred_at, data), in store order."""
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(events_table.c.type, events_table.c.occurred_at, events_table.c.data)
                .where(events_table.c.type.in_(types))
                .order_by(events_table.c.position)
            ).all()
        )


def replay_closed_loop(
    store: PostgresEventStore,
    bootstrap: str,
    tmp_path: Path,
    trace: Trace,
    tree: str,
    live_from: datetime | None,
    *,
    within: float,
) -> ReplaySummary:
    """``trace`` closed loop (from ``live_from``: its history open loop before it) under
    ``tree``, with the demo price book; its wall time must stay ``within`` seconds."""
    path = tmp_path / "tree.yaml"
    path.write_text(tree)
    started = time.monotonic()
    with as_file(files("dlc_ledger.resources") / "pricebooks" / "demo-2026.yaml") as book:
        summary = run_replay(
            trace,
            quotas=path,
            pricebook=book,
            store=store,
            bootstrap=bootstrap,
            data_dir=tmp_path,
            closed_loop=True,
            live_from=live_from,
            cycle=60,
            progress=None,
            timeout=300,
        )
    wall = time.monotonic() - started
    print("\n".join(summary.lines()), f"\nwall {wall:.1f} s")
    assert wall < within
    return summary
