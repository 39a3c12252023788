"""The demo's second half: the trace's window replayed closed loop, priced beside the trace.

The open-loop replay shows what the cluster did; this replays twelve busy hours of the same
trace (the rows created 2027-03-11 00:00-12:00Z, 172 jobs) closed loop, each job arriving
suspended and running only when the live dispatcher admits it, under the demo tree's
queue policies and preemption rules at a quarter of its quantities (the window alone never
fills the whole tree: at full size nothing would wait). ``--what-if FIFO,Balance`` adds one
closed-loop run per policy, every queue under it. Each run is a database of its own
(:mod:`dlc_ledger.wiring.runs`); afterwards the CLI and the API read the closed-loop one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from importlib.resources import as_file
from typing import Any

import typer

from consumers.projector import Projector
from dlc_ledger.cli.tables import render_rows
from dlc_ledger.resources import DEMO_BUDGETS, DEMO_PRICE_BOOK, DEMO_QUOTAS, DEMO_SUBSCRIPTIONS
from dlc_ledger.services.billing import tick
from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.services.yaml_files import load_yaml
from dlc_ledger.wiring import context
from dlc_ledger.wiring.replay import run_replay
from dlc_ledger.wiring.replay.reference_data import reshaped_tree
from dlc_ledger.wiring.replay.run import load_replay_trace
from dlc_ledger.wiring.runs import OPEN_LOOP, Runs, run_url
from ledger.errors import Unavailable
from ledger.money import format_minor
from projections.billing import currency_scales
from projections.dispatch import (
    DecisionWindow,
    ScheduleRow,
    estimate_coverage,
    preemptions_report,
    schedule_rows,
    waits_report,
)
from projections.registry import all_projections

__all__ = ["CLOSED_LOOP", "DEMO_SCALE", "DEMO_WINDOW", "duration", "run_what_if"]

#: twelve busy hours of openb (172 jobs) and the share of the demo tree they contend for
DEMO_WINDOW = (datetime(2027, 3, 11, tzinfo=UTC), datetime(2027, 3, 11, 12, tzinfo=UTC))
DEMO_SCALE = Decimal("0.25")
CLOSED_LOOP = "closed-loop"


def duration(seconds: float | None) -> str:
    """``3d 4h``, ``2h 5m``, ``4m 10s``, ``12s``: two units at most."""
    if seconds is None:
        return "-"
    left = round(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def _heading(title: str) -> None:
    typer.echo("")
    typer.echo(title)
    typer.echo("-" * len(title))


def _capacity_mgpu(tree_text: str) -> int:
    """The GPUs the (reshaped) tree's roots guarantee, in mGPU."""
    nodes = load_yaml(tree_text)["quotas"]
    return sum(
        qty
        for node in nodes
        if not node.get("parent")
        for key, qty in (node.get("min") or {}).items()
        if key.startswith("gpu/")
    )


def _replay(run: str, policy: str | None) -> None:
    with (
        as_file(DEMO_QUOTAS) as quotas,
        as_file(DEMO_PRICE_BOOK) as pricebook,
        as_file(DEMO_SUBSCRIPTIONS) as plan,
        as_file(DEMO_BUDGETS) as budgets,
    ):
        summary = run_replay(
            "openb",
            "openb",
            quotas=quotas,
            pricebook=pricebook,
            subscriptions=plan,
            budgets=budgets,
            window=DEMO_WINDOW,
            until=DEMO_WINDOW[1],
            scale=DEMO_SCALE,
            policy=policy,
            closed_loop=True,
            run=run,
        )
    loop = summary.closed_loop
    assert loop is not None
    typer.echo(
        f"run {run}: {loop.jobs} jobs in {loop.cycles:,} dispatcher cycles "
        f"({summary.wall_seconds:.0f} s): {loop.admitted} admissions, {loop.preemptions} "
        f"preemptions ({loop.victims} victims), {loop.never_admitted} never admitted"
    )


def _billed(url: str) -> Any:
    """The run's store, billed to its last fact (its bills as the open loop's)."""
    store = context.open_store_at(url)
    end = observed_cluster_time(store)
    if end is None:
        raise Unavailable("the closed-loop run stored no cluster facts")
    tick(store, end)
    Projector(store, all_projections()).catch_up()
    return store


def _figures(
    url: str, capacity: int, names: Sequence[str] | None
) -> tuple[list[ScheduleRow], Callable[[str], int]]:
    store = context.open_store_at(url)
    try:
        with store.reading() as conn:
            return schedule_rows(conn, DEMO_WINDOW, capacity, names), currency_scales(conn)
    finally:
        store.close()


def _cells(label: str, row: ScheduleRow, scale_of: Callable[[str], int]) -> dict[str, Any]:
    cost = "-"
    if row.currency is not None:
        cost = format_minor(row.cost_minor, scale_of(row.currency), row.currency, grouped=True)
    return {
        "quota": row.quota,
        "schedule": label,
        "jobs": row.jobs,
        "ran": row.started,
        "queued_at_end": row.waiting,
        "wait_p50": duration(row.wait_p50_s),
        "wait_p95": duration(row.wait_p95_s),
        "gpu_hours": f"{row.gpu_hours:,.1f}",
        "gpu_util": "-" if row.utilisation is None else f"{row.utilisation:.0%}",
        "preemptions": row.preemptions,
        "lost_gpu_hours": f"{row.lost_gpu_hours:,.2f}",
        "cost": cost,
    }


def run_what_if(policies: Sequence[str] = ()) -> None:
    """Replay the window closed loop (and once per policy), then print the what-if table,
    the closed loop's waits and preemptions, and make it the run commands read."""
    base = context.base_database_url(announce=False)
    start, end = DEMO_WINDOW
    _heading(
        f"Closed loop: the rows created {start:%Y-%m-%d %H:%M}Z-{end:%H:%M}Z through the live "
        f"dispatcher (demo tree x {DEMO_SCALE})"
    )
    schedules = [
        ("dispatcher", CLOSED_LOOP, None),
        *((p, f"what-if-{p.lower()}", p) for p in policies),
    ]
    for _label, run, policy in schedules:
        _replay(run, policy)
        _billed(run_url(base, run)).close()
    with as_file(DEMO_QUOTAS) as quotas:
        capacity = _capacity_mgpu(reshaped_tree(quotas, None, DEMO_SCALE).text)
    names = [i.job_name for i in load_replay_trace("openb", "openb", window=DEMO_WINDOW).instances]
    tables = [("trace", *_figures(base, capacity, names))]
    tables += [
        (label, *_figures(run_url(base, run), capacity, None)) for label, run, _ in schedules
    ]
    _heading(
        f"What if: the trace's own schedule vs DLC Ledger's dispatcher, per quota "
        f"(GPU util: of the {capacity / 1000:g} GPUs the tree guarantees, over the window)"
    )
    rows = []
    for quota in [r.quota for r in tables[0][1]]:
        for label, figures, scales in tables:
            found = next((r for r in figures if r.quota == quota), None)
            if found is not None:
                rows.append(_cells(label, found, scales))
    typer.echo(render_rows(rows, "table"))
    typer.echo("")
    typer.echo(
        f"Over the window: jobs submitted in it; ran: started by {end:%H:%M}Z; wait: submission "
        "to the first pod running; GPU-hours and cost: occupancy inside the window. trace: "
        "the open-loop run's jobs of the window, as the cluster ran them with all its GPUs."
    )
    Runs(context.settings().data_dir, base).set_default(CLOSED_LOOP)
    _print_dispatcher_reports(run_url(base, CLOSED_LOOP))
    _print_runs_hint([run for _, run, _ in schedules])


def _print_dispatcher_reports(url: str) -> None:
    store = context.open_store_at(url)
    try:
        with store.reading() as conn:
            waits = waits_report(conn, DecisionWindow())
            preemptions = preemptions_report(conn, DecisionWindow())
            calibration = estimate_coverage(conn)
    finally:
        store.close()
    _heading("Closed loop: waits by quota and priority (report waits)")
    keep = ("quota", "priority", "waits", "requeued", "p50_s", "p95_s", "max_s")
    shown = [
        {
            k: (duration(float(r[k])) if k.endswith("_s") and r[k] is not None else r[k])
            for k in keep
        }
        for r in waits
        if r["waits"]
    ]
    typer.echo(render_rows(shown, "table"))
    _heading(f"Closed loop: preemptions ({len(preemptions)} victims; report preemptions)")
    columns = ("preemptor", "preemptor_quota", "victim", "victim_quota", "reason", "gpu_hours_lost")
    shown = [
        {"at": f"{r['at']:%Y-%m-%d %H:%M}Z", **{k: r[k] for k in columns}} for r in preemptions
    ]
    typer.echo(render_rows(shown[:10], "table"))
    _heading("Closed loop: how well the start estimates held (report estimates)")
    if calibration.coverage is None:
        typer.echo(f"{calibration.waits} waits ended in an admission; none had a stated range")
    else:
        typer.echo(
            f"of {calibration.ranged} waits with a stated start range (10th-90th percentile), "
            f"the job started inside it for {calibration.inside} "
            f"({calibration.coverage:.0%}), earlier for {calibration.below}, later for "
            f"{calibration.above}"
        )


def _print_runs_hint(runs: list[str]) -> None:
    _heading("Which run the CLI and the dashboard read")
    typer.echo(
        f"From now on they read run {CLOSED_LOOP} (this closed loop): report waits, report "
        "preemptions, queue, jobs why and the dashboard have the dispatcher's decisions."
    )
    typer.echo(
        f"The exact open-loop replay (the bills above): dlc-ledger --run {OPEN_LOOP} <command>, "
        f"or DLC_RUN={OPEN_LOOP}; dlc-ledger runs lists them all ({', '.join([OPEN_LOOP, *runs])})."
    )
