"""The demo's live hours, compared: the trace's own schedule of a window against the dispatcher's.

The demo's world ends with twelve live hours (:mod:`dlc_ledger.wiring.replay.demo_world`):
the rows openb created 2027-03-11 00:00-12:00Z (172 training jobs) played again after the
trace's end, each job arriving suspended and running only when the live dispatcher admits
it, while an inference service (DLRM's app-151) scales on the same quota tree. Here their
figures are set beside the trace's own schedule of the same rows, per quota.
``--what-if FIFO,Balance`` replays the live hours once per policy, every queue under it,
each into a run of its own (:mod:`dlc_ledger.wiring.runs`); the CLI, the API and the
dashboard keep reading the demo's one world.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import typer

from dlc_ledger.cli.tables import render_rows
from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS, DEMO_SUBSCRIPTIONS
from dlc_ledger.services.yaml_files import load_yaml
from dlc_ledger.wiring import context
from dlc_ledger.wiring.replay import DEMO_WINDOW, LIVE_SERVICE, DemoWorld, live_tree, run_replay
from dlc_ledger.wiring.runs import run_url
from ledger.money import format_minor
from projections.dispatch import (
    DecisionWindow,
    ScheduleRow,
    estimate_coverage,
    preemptions_report,
    schedule_rows,
    waits_report,
)

__all__ = ["duration", "run_what_if"]


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
    """The GPUs the tree's roots guarantee, in mGPU."""
    nodes = load_yaml(tree_text)["quotas"]
    return sum(
        qty
        for node in nodes
        if not node.get("parent")
        for key, qty in (node.get("min") or {}).items()
        if key.startswith("gpu/")
    )


def _replay(world: DemoWorld, run: str, policy: str) -> None:
    """The live hours alone (nothing of the history runs then) under ``policy``."""
    live = tuple(i for i in world.trace.instances if i.job_name.endswith("-live"))
    with (
        as_file(DEMO_QUOTAS) as quotas,
        as_file(DEMO_PRICE_BOOK) as pricebook,
        as_file(DEMO_SUBSCRIPTIONS) as plan,
        tempfile.TemporaryDirectory() as scratch,
    ):
        tree = Path(scratch) / "live-quotas.yaml"  # the live hours' tree, as in the world
        tree.write_text(live_tree(quotas.read_text()))
        summary = run_replay(
            replace(world.trace, instances=live),
            quotas=tree,
            pricebook=pricebook,
            subscriptions=plan,
            policy=policy,
            closed_loop=True,
            run=run,
        )
    loop = summary.closed_loop
    assert loop is not None
    typer.echo(
        f"run {run}: {loop.jobs} jobs and replicas in {loop.cycles:,} dispatcher cycles "
        f"({summary.wall_seconds:.0f} s): {loop.admitted} admissions, {loop.preemptions} "
        f"preemptions ({loop.victims} victims), {loop.never_admitted} never admitted"
    )


def _figures(
    url: str, capacity: int, names: Sequence[str], window: Any
) -> tuple[list[ScheduleRow], Callable[[str], int]]:
    from projections.billing import currency_scales

    store = context.open_store_at(url)
    try:
        with store.reading() as conn:
            return schedule_rows(conn, window, capacity, names), currency_scales(conn)
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


def run_what_if(world: DemoWorld, policies: Sequence[str] = ()) -> None:
    """Print the live hours beside the trace's schedule of the same rows (and, per policy,
    a replay of the live hours), then the dispatcher's waits, preemptions and estimates."""
    base = context.base_database_url(announce=False)
    start, end = DEMO_WINDOW
    live_start = world.live_window[0]
    schedules = [(p, f"what-if-{p.lower()}") for p in policies]
    if schedules:
        _heading("What if: the live hours again, every queue under one policy")
    for policy, run in schedules:
        _replay(world, run, policy)
    with as_file(DEMO_QUOTAS) as quotas:
        capacity = _capacity_mgpu(live_tree(quotas.read_text()))
    tables = [
        ("trace", *_figures(base, capacity, world.trace_jobs, DEMO_WINDOW)),
        ("dispatcher", *_figures(base, capacity, world.live_jobs, world.live_window)),
    ]
    tables += [
        (policy, *_figures(run_url(base, run), capacity, world.live_jobs, world.live_window))
        for policy, run in schedules
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
        f"trace: the jobs openb created {start:%Y-%m-%d %H:%M}Z-{end:%H:%M}Z as the cluster ran "
        f"them; dispatcher: the same jobs in the live hours from {live_start:%Y-%m-%d %H:%M}Z, "
        f"admitted by the live dispatcher while {LIVE_SERVICE} scaled on the inference quota. "
        "ran: started in the window; wait: submission to the first pod running; GPU-hours "
        "and cost: occupancy inside the window."
    )
    _print_dispatcher_reports(base)
    _print_runs_hint([run for _, run in schedules])


def _print_dispatcher_reports(url: str) -> None:
    store = context.open_store_at(url)
    try:
        with store.reading() as conn:
            waits = waits_report(conn, DecisionWindow())
            preemptions = preemptions_report(conn, DecisionWindow())
            calibration = estimate_coverage(conn)
    finally:
        store.close()
    _heading("Live hours: waits by quota and priority (report waits)")
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
    _heading(f"Live hours: preemptions ({len(preemptions)} victims; report preemptions)")
    columns = ("preemptor", "preemptor_quota", "victim", "victim_quota", "reason", "gpu_hours_lost")
    shown = [
        {"at": f"{r['at']:%Y-%m-%d %H:%M}Z", **{k: r[k] for k in columns}} for r in preemptions
    ]
    typer.echo(render_rows(shown[:10], "table"))
    _heading("Live hours: how well the start estimates held (report estimates)")
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
    _heading("One world")
    typer.echo(
        "The CLI, the API and the dashboard read this world: the whole history billed "
        "exactly, and the live hours (report waits, report preemptions, queue, jobs why, "
        "services show app-151-live)."
    )
    if runs:
        typer.echo(f"The what-if runs: dlc-ledger --run RUN <command> ({', '.join(runs)}).")
