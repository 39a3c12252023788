"""``dlc-ledger demo``: the main job on embedded defaults, end to end.

Replays the openb trace of Alibaba's PAI cluster (8,152 pods on 1,523 nodes, five
months of cluster time) through kubesim → watchers → Kafka → event store →
projections, with the demo price book and quota tree, checked exact against the
trace; then twelve live hours in the same world, where the live dispatcher decides
(training queued and preempted while an inference service scales:
:mod:`dlc_ledger.wiring.replay.demo_world`); runs the billing tick at the world's end
(rating every finished occupancy, accruing open ones, closing every month whose grace
window has passed into invoices); then prints what finance, team leads and auditors
would look at, and the live hours beside the trace's own schedule. Everything it prints
is read back from the projections, and the data stays in place for ``report``, ``jobs
show``, ``invoices show`` and the dashboard: one world. Running it again adds nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from importlib.resources import as_file
from pathlib import Path
from typing import Any

import typer

from consumers.projector import Projector
from dlc_ledger.cli.tables import render_rows
from dlc_ledger.cli.what_if import run_what_if
from dlc_ledger.presenters import with_amounts
from dlc_ledger.resources import DEMO_PRICE_BOOK, DEMO_QUOTAS, DEMO_SUBSCRIPTIONS
from dlc_ledger.services.billing import tick
from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.services.subscriptions import subscription_report, subscription_row, subscriptions
from dlc_ledger.wiring import context
from dlc_ledger.wiring.replay import (
    DemoWorld,
    StoreCounts,
    add_inference,
    demo_world,
    run_replay,
)
from dlc_ledger.wiring.runs import OPEN_LOOP
from ledger.errors import Unavailable
from ledger.money import default_scale, format_minor
from projections.billing import (
    InvoiceTrail,
    ReportWindow,
    cost_report,
    currency_scales,
    largest_gpu_line_trail,
    load_schedule,
    subscription_lines,
    trace_span_seconds,
    usage_report,
)
from projections.quotas import usage_at
from projections.registry import all_projections

__all__ = ["run_demo"]

MGPU_SECONDS_PER_GPU_HOUR = Decimal(1000 * 3600)


def _heading(title: str) -> None:
    typer.echo("")
    typer.echo(title)
    typer.echo("-" * len(title))


class _Money:
    """Formats minor units at the price books' scale (which may be finer than ISO's)."""

    def __init__(self, currency: str | None, scale: int | None) -> None:
        self.scales = {currency: scale} if currency and scale is not None else {}

    def __call__(self, minor: int, currency: str) -> str:
        scale = self.scales.get(currency, default_scale(currency))
        return format_minor(minor, scale, currency, grouped=True)


def _gpu_hours(mgpu_seconds: int) -> str:
    return f"{Decimal(mgpu_seconds) / MGPU_SECONDS_PER_GPU_HOUR:,.1f}"


def run_demo(
    *, fresh: bool = False, yes: bool = False, closed_loop: bool = True, what_if: Sequence[str] = ()
) -> None:
    world = demo_world() if closed_loop else None
    if world is not None and not fresh and _played(world):
        _replayed_before(world)
    else:
        _replay(world, fresh=fresh, yes=yes)
    store = context.open_store_at(context.base_database_url(announce=False))
    try:
        trace_end = observed_cluster_time(store)
        if trace_end is None:
            raise Unavailable("the replay stored no cluster facts")
        billed = tick(store, trace_end)
        Projector(store, all_projections()).catch_up()
        typer.echo(
            f"billing at cluster time {trace_end:%Y-%m-%d %H:%M}Z: "
            f"{billed.rated.posted:,} ledger transactions posted by this run, "
            f"{len(billed.invoices)} invoices issued by this run"
        )
        _print_reports(store)
        _print_subscriptions(store, trace_end)
    finally:
        store.close()
    if world is not None:
        run_what_if(world, what_if)
    _print_dashboard_hint()


def _played(world: DemoWorld) -> bool:
    """Whether the store already holds the world to its live hours: a demo run again adds
    nothing (the live hours are the dispatcher's, decided once; ``--fresh`` plays anew)."""
    try:
        store = context.open_store_at(context.base_database_url(announce=False, create=True))
    except Unavailable:  # no schema yet: a first run
        return False
    try:
        clock = observed_cluster_time(store)
    finally:
        store.close()
    return clock is not None and clock >= world.live_from


def _replayed_before(world: DemoWorld) -> None:
    store = context.open_store_at(context.base_database_url(announce=False))
    try:
        events = StoreCounts.read(store).events
    finally:
        store.close()
    typer.echo(
        f"the world is in the store already: {events:,} events (0 new), the history of "
        f"{sum(not i.job_name.endswith('-live') for i in world.trace.instances):,} pods and "
        f"the live hours from {world.live_from:%Y-%m-%d %H:%M}Z (--fresh plays it anew)"
    )


def _replay(world: DemoWorld | None, *, fresh: bool, yes: bool) -> None:
    # package data as files (a no-op where the package is a directory, as installed)
    with (
        as_file(DEMO_QUOTAS) as quotas,
        as_file(DEMO_PRICE_BOOK) as pricebook,
        as_file(DEMO_SUBSCRIPTIONS) as plan,
    ):
        summary = run_replay(
            "openb" if world is None else world.trace,
            "openb",
            quotas=quotas,
            pricebook=pricebook,
            subscriptions=plan,
            fresh=fresh,
            yes=yes,
            run=OPEN_LOOP,
            closed_loop=world is not None,
            live_from=None if world is None else world.live_from,
            at_live=None if world is None else _inference_at(world, quotas.read_text()),
        )
    if not summary.ok:
        raise Unavailable("the replay does not match the trace: " + "; ".join(summary.mismatches))
    typer.echo(
        f"replayed {summary.instances:,} pods on {summary.nodes:,} nodes in "
        f"{summary.wall_seconds:.0f} s: {summary.events_total:,} events in the store "
        f"({summary.events_stored:,} new), {summary.expected_started:,} occupancies, "
        f"{summary.dead_letters} dead letters"
    )
    loop = summary.closed_loop
    if world is not None and loop is not None:
        typer.echo(
            f"then the live hours from {world.live_from:%Y-%m-%d %H:%M}Z under the dispatcher: "
            f"{loop.jobs} jobs and replicas, {loop.admitted} admissions, {loop.preemptions} "
            f"preemptions ({loop.victims} victims), {loop.waits} waits"
        )


def _inference_at(world: DemoWorld, tree: str) -> Callable[[Any], None]:
    """The inference quota added as the live hours begin."""
    return lambda store: add_inference(store, tree, world.live_from)


def _program() -> str:
    """How the user called this program (``./dev demo`` runs ``.venv/bin/dlc-ledger``, which
    may not be on PATH): the printed commands then work as they are pasted."""
    called = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if called is not None and called.name == "dlc-ledger":
        return str(called)
    return "dlc-ledger"


def _print_dashboard_hint() -> None:
    program = _program()
    _heading("Dashboard and API on this data")
    typer.echo(f"  {program} up --no-replay")
    typer.echo(
        "prints the dashboard's URL and an admin token and serves them until Ctrl-C "
        "(same DATABASE_URL / DLC_DATA_DIR as this run). The API alone:"
    )
    typer.echo(f"  {program} tokens create --role admin --name me   # prints the token once")
    typer.echo(f"  {program} api serve --port 8000")
    typer.echo('  curl -H "Authorization: Bearer <token>" http://127.0.0.1:8000/v1/whoami')


def _print_reports(store: Any) -> None:
    window = ReportWindow(start=None, end=None, as_of=None)
    with store.snapshot() as uow:
        conn = uow.connection
        schedule = load_schedule(conn)
        money = _Money(schedule.currency, schedule.scale)
        usage = usage_report(conn, ("workspace", "billing_mode"), window)
        cost = {
            (r["workspace"], r["billing_mode"]): r
            for r in cost_report(conn, ("workspace", "billing_mode"), window, source="rated")
        }
        rows = []
        for r in usage:
            c = cost.get((r["workspace"], r["billing_mode"]))
            rows.append(
                {
                    "workspace": r["workspace"],
                    "billing_mode": r["billing_mode"],
                    "gpu_hours": _gpu_hours(r["mgpu_seconds"]),
                    "cpu_core_hours": f"{Decimal(r['cpu_milli_seconds']) / 3_600_000:,.1f}",
                    "cost": money(c["cost_minor"], c["currency"]) if c else "-",
                }
            )
        _heading("GPU-hours and cost by workspace and billing mode (whole trace)")
        typer.echo(render_rows(rows, "table"))

        # exact GPU-hours per leaf quota (occupancy facts, billed to the quota the
        # workspace was bound to), against what its guarantee would have covered
        by_quota = [r for r in usage_report(conn, ("quota",), window) if r["quota"] != "-"]
        by_quota.sort(key=lambda r: r["mgpu_seconds"], reverse=True)
        span = trace_span_seconds(uow)
        guaranteed: dict[str, int] = {}
        for u in usage_at(conn):
            if u.flavor.startswith("gpu/"):
                guaranteed[u.quota] = max(guaranteed.get(u.quota, 0), u.min)
        _heading("Top quotas by GPU usage")
        rows = []
        for r in by_quota[:5]:
            min_mgpu = int(guaranteed.get(r["quota"], 0) or 0)
            covered = Decimal(min_mgpu) * Decimal(span)
            rows.append(
                {
                    "quota": r["quota"],
                    "gpu_hours": _gpu_hours(r["mgpu_seconds"]),
                    "guaranteed_gpus": f"{min_mgpu / 1000:g}",
                    "of_guarantee": f"{Decimal(r['mgpu_seconds']) / covered:.0%}"
                    if covered
                    else "borrowed only",
                }
            )
        typer.echo(render_rows(rows, "table"))
        _print_invoice_trail(largest_gpu_line_trail(uow), money)


def _print_subscriptions(store: Any, trace_end: datetime) -> None:
    subs = subscriptions(store)
    if not subs:
        return
    _heading(f"Subscriptions at {trace_end:%Y-%m-%d %H:%M}Z (what the online quotas run on)")
    keep = (
        "subscription_id",
        "group",
        "spec",
        "nodes",
        "workspace",
        "term",
        "status",
        "terms",
        "paid_minor",
        "refunded_minor",
        "currency",
    )
    with store.reading() as conn:
        scale_of = currency_scales(conn)
        lines = subscription_lines(conn)
    rows = [{k: v for k, v in subscription_row(s, trace_end).items() if k in keep} for s in subs]
    typer.echo(render_rows(with_amounts(rows, "table", scale_of), "table"))
    _heading("Subscription lines on the invoices (billed in full at order; refunds credited)")
    shown = [
        {
            "period": r["period"],
            "workspace": r["workspace"],
            "line": r["description"],
            "amount_minor": r["amount_minor"],
            "currency": r["currency"],
        }
        for r in lines
    ]
    typer.echo(render_rows(with_amounts(shown, "table", scale_of), "table"))
    _heading("Are we using what we pay for? (report subscriptions, whole trace)")
    report = subscription_report(store, "group", subs[0].starts_at, trace_end)
    typer.echo(render_rows(with_amounts(report, "table", scale_of), "table"))


def _print_invoice_trail(trail: InvoiceTrail | None, money: _Money) -> None:
    _heading("Audit trail: one invoice line back to the Kubernetes events")
    if trail is None:
        typer.echo("no invoice issued yet")
        return
    line = trail.line
    typer.echo(
        f"{trail.invoices} invoices issued; the largest GPU line is on invoice "
        f"{line['invoice_id']} ({line['workspace']}, {line['period']}, total "
        f"{money(line['total_minor'], line['currency'])}):"
    )
    typer.echo(
        f"  line {line['line_no']}: {line['resource']} {line['billing_mode']} at "
        f"{line['rate']}, {line['quantity']} {line['unit']} = "
        f"{money(line['amount_minor'], line['currency'])}"
        f" (rounded once from {line['amount_precise']} minor units)"
    )
    job = trail.job_uid
    typer.echo(f"  largest of its {len(trail.jobs):,} jobs: {job}")
    for data, position in trail.postings:
        amounts = ", ".join(
            f"{p['account']} {'' if str(p['amount_minor']).startswith('-') else '+'}"
            f"{p['amount_minor']}"
            for p in data["postings"]
        )
        typer.echo(
            f"  <- ledger transaction {data['transaction_id']} (store position {position}, "
            f"period {data.get('period')}): {amounts}"
        )
    for cause in trail.causes:
        facts = cause.data
        what = (
            f"pod {facts.get('pod_name') or facts.get('pod_uid')} on node {facts.get('node')}, "
            f"{facts.get('mgpu')} mGPU"
            if cause.type == "OccupancyStarted"
            else f"reason {facts.get('reason')}, estimated={facts.get('estimated')}"
        )
        typer.echo(
            f"  <- {cause.type} at {cause.occurred_at:%Y-%m-%d %H:%M:%S}Z (store position "
            f"{cause.position}, from {cause.source}): {what}"
        )
    typer.echo(
        f"  inspect: dlc-ledger invoices show {line['invoice_id']} ; "
        f"dlc-ledger jobs show {job} ; dlc-ledger verify"
    )
