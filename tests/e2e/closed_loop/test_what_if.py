"""The what-if on a trace window: the same rows replayed open loop (the cluster's schedule)
and closed loop (the dispatcher's, on a quarter of the demo tree), each billed.

Closed-loop usage and cost are checked exactly against the occupancy the dispatcher allowed
(the raw OccupancyStarted/Ended events, priced with the demo book's rates by hand), as the
open loop's are against the trace; the two schedules hold the same jobs per quota.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from consumers.projector import Projector
from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS
from dlc_ledger.services.billing import tick
from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.wiring.replay import run_replay
from dlc_ledger.wiring.replay.run import load_replay_trace
from ledger.store.postgres import PostgresEventStore
from ledger.store.schema import events as events_table
from projections.billing.reports import ReportWindow, cost_report, usage_report
from projections.dispatch.schedules import schedule_rows
from projections.registry import all_projections
from tests.support.databases import TemplateDatabases

WINDOW = (datetime(2027, 3, 11, tzinfo=UTC), datetime(2027, 3, 11, 3, tzinfo=UTC))
#: the demo book's list prices per unit-hour (GPU, core, GiB) and its idle multiplier
RATES = {"gpu": Fraction("2.40"), "cpu": Fraction("0.048"), "memory": Fraction("0.006")}
IDLE = Fraction("0.30")


def _replay(store: PostgresEventStore, bootstrap: str, data_dir: Path, **options: Any) -> Any:
    with as_file(DEMO_QUOTAS) as quotas, as_file(DEMO_PRICE_BOOK) as book:
        summary = run_replay(
            "openb",
            "openb",
            quotas=quotas,
            pricebook=book,
            window=WINDOW,
            store=store,
            bootstrap=bootstrap,
            data_dir=data_dir,
            progress=None,
            timeout=600,
            **options,
        )
    assert summary.ok and summary.dead_letters == 0
    end = observed_cluster_time(store)
    assert end is not None
    tick(store, end)
    Projector(store, all_projections()).catch_up()
    return summary


def _occupancy_by_workspace(
    store: PostgresEventStore,
) -> tuple[dict[str, int], dict[str, Fraction]]:
    """mGPU-seconds and the exact cost per workspace from the raw occupancy events."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(events_table.c.type, events_table.c.data)
            .where(events_table.c.type.in_(("OccupancyStarted", "OccupancyEnded")))
            .order_by(events_table.c.position)
        ).all()
    opened: dict[str, dict[str, Any]] = {}
    mgpu_s: dict[str, int] = defaultdict(int)
    cost: dict[str, Fraction] = defaultdict(Fraction)
    for kind, data in rows:
        if kind == "OccupancyStarted":
            opened[data["occupancy_id"]] = data
            continue
        start = opened.pop(data["occupancy_id"])
        seconds = int(
            (
                datetime.fromisoformat(data["ended_at"])
                - datetime.fromisoformat(start["started_at"])
            ).total_seconds()
        )
        ws = start["workspace"]
        mgpu_s[ws] += start["mgpu"] * seconds
        hourly = (
            Fraction(start["mgpu"], 1000) * RATES["gpu"]
            + Fraction(start["cpu_milli"], 1000) * RATES["cpu"]
            + Fraction(start["memory_mib"], 1024) * RATES["memory"]
        )
        idle = start.get("billing_mode") == "idle"
        cost[ws] += hourly * Fraction(seconds, 3600) * (IDLE if idle else 1)
    assert not opened, "every closed-loop pod ended"
    return mgpu_s, cost


@pytest.mark.slow
def test_closed_loop_bills_exactly_what_the_dispatcher_allowed(
    store: PostgresEventStore, databases: TemplateDatabases, bootstrap: str, tmp_path: Path
) -> None:
    closed = _replay(store, bootstrap, tmp_path / "closed", closed_loop=True, scale=Decimal("0.25"))
    loop = closed.closed_loop
    assert loop is not None and loop.never_admitted == 0
    assert loop.waits > 0  # a quarter of the tree makes the window queue

    mgpu_s, exact = _occupancy_by_workspace(store)
    with store.engine.connect() as conn:
        usage = {r["workspace"]: r for r in usage_report(conn, ("workspace",), ReportWindow())}
        rated = cost_report(conn, ("workspace",), ReportWindow(), source="rated")
    assert {ws: int(r["mgpu_seconds"]) for ws, r in usage.items()} == dict(mgpu_s)
    for row in rated:
        # minor units (cents) at full precision, as the rater keeps them
        assert Decimal(row["cost_minor_precise"]) == pytest.approx(
            Decimal(exact[row["workspace"]].numerator * 100) / exact[row["workspace"]].denominator,
            abs=Decimal("0.000001"),
        ), row["workspace"]

    url = databases.empty()
    open_store = PostgresEventStore(url)
    try:
        from migrations.runner import upgrade

        upgrade(open_store.engine)
        _replay(open_store, bootstrap, tmp_path / "open")
        names = [i.job_name for i in load_replay_trace("openb", "openb", window=WINDOW).instances]
        with open_store.engine.connect() as conn:
            trace_rows = schedule_rows(conn, WINDOW, 20_000, names)
        with store.engine.connect() as conn:
            loop_rows = schedule_rows(conn, WINDOW, 20_000)
    finally:
        open_store.close()
        databases.drop(url)
    assert {r.quota: r.jobs for r in trace_rows} == {r.quota: r.jobs for r in loop_rows}
    assert trace_rows[-1].quota == "(all)" and trace_rows[-1].jobs == len(names)
    assert all(r.preemptions == 0 for r in trace_rows)  # the cluster's schedule preempts nobody
    assert sum(r.jobs for r in loop_rows[:-1]) == loop_rows[-1].jobs
