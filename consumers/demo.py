"""``dlc-ledger demo``: the main job on embedded defaults, end to end.

Replays the openb trace of Alibaba's PAI cluster (8,152 pods on 1,523 nodes, five
months of cluster time) through kubesim → watchers → Kafka → event store →
projections, with the demo price book and quota tree; runs the billing tick at
the trace's end (rating every finished occupancy, accruing open ones, closing
every month whose grace window has passed into invoices); then prints what
finance, team leads and auditors would look at. Everything it prints is read
back from the projections, and the data stays in place for ``report``, ``jobs
show`` and ``invoices show``. Running it again adds nothing.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import typer
from sqlalchemy import text

from consumers import context
from consumers.billing_jobs import tick
from consumers.finance_cli import render
from consumers.projector import Projector
from consumers.replay import run_replay
from ledger.money import format_minor
from projections.finance_reports import ReportWindow, cost_report, usage_report
from projections.registry import all_projections

__all__ = ["run_demo"]

ROOT = Path(__file__).resolve().parents[1]
PRICE_BOOK = ROOT / "ops" / "pricebooks" / "demo-2026.yaml"
QUOTAS = ROOT / "ops" / "quotas" / "demo.yaml"
MGPU_SECONDS_PER_GPU_HOUR = Decimal(1000 * 3600)


def _heading(title: str) -> None:
    typer.echo("")
    typer.echo(title)
    typer.echo("-" * len(title))


def _gpu_hours(mgpu_seconds: int) -> str:
    return f"{Decimal(mgpu_seconds) / MGPU_SECONDS_PER_GPU_HOUR:,.1f}"


def run_demo(*, fresh: bool = False) -> None:
    summary = run_replay("openb", "openb", quotas=QUOTAS, pricebook=PRICE_BOOK, fresh=fresh)
    typer.echo(
        f"replayed {summary.instances:,} pods on {summary.nodes:,} nodes in "
        f"{summary.wall_seconds:.0f} s: {summary.events_total:,} events in the store "
        f"({summary.events_stored:,} new), {summary.occupancies_started:,} occupancies, "
        f"{summary.dead_letters} dead letters"
    )
    store = context.open_store(announce=False)
    try:
        with store.engine.connect() as conn:
            trace_end = conn.execute(
                text("SELECT max(occurred_at) FROM events WHERE stream LIKE 'job/%'")
            ).scalar_one()
        billed = tick(store, trace_end)
        Projector(store, all_projections()).catch_up()
        typer.echo(
            f"billing at cluster time {trace_end:%Y-%m-%d %H:%M}Z: "
            f"{billed.rated.posted:,} ledger transactions posted by this run, "
            f"{len(billed.invoices)} invoices issued by this run"
        )
        _print_reports(store)
    finally:
        store.close()


def _print_reports(store: Any) -> None:
    window = ReportWindow(start=None, end=None, as_of=None)
    with store.engine.begin() as conn:
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
                    "cost": format_minor(c["cost_minor"], 2, c["currency"]) if c else "-",
                }
            )
        _heading("GPU-hours and cost by workspace and billing mode (whole trace)")
        typer.echo(render(rows, "table"))

        # GPU-hours per quota node: the integral of its projected usage over cluster time
        by_quota = conn.execute(
            text(
                "SELECT quota, sum(used * EXTRACT(EPOCH FROM (nxt - at))) AS mgpu_seconds "
                "FROM (SELECT quota, used, at, lead(at, 1, at) OVER "
                "(PARTITION BY quota, flavor ORDER BY at) AS nxt FROM quota_usage_history "
                "WHERE flavor LIKE 'gpu/%') h GROUP BY quota ORDER BY mgpu_seconds DESC LIMIT 5"
            )
        ).all()
        _heading("Top quotas by GPU usage")
        typer.echo(
            render(
                [{"quota": q, "gpu_hours": _gpu_hours(int(mgpu_s or 0))} for q, mgpu_s in by_quota],
                "table",
            )
        )
        peaks = conn.execute(
            text(
                "SELECT quota, flavor, max(borrowed) AS peak_borrowed, max(used) AS peak_used, "
                "max(min) AS min FROM quota_usage_history WHERE flavor LIKE 'gpu/%' "
                "GROUP BY quota, flavor ORDER BY peak_borrowed DESC, quota LIMIT 5"
            )
        ).mappings()
        typer.echo("")
        typer.echo(
            render(
                [
                    {
                        "quota": p["quota"],
                        "flavor": p["flavor"],
                        "guaranteed_gpus": f"{p['min'] / 1000:g}",
                        "peak_used_gpus": f"{p['peak_used'] / 1000:g}",
                        "peak_borrowed_gpus": f"{p['peak_borrowed'] / 1000:g}",
                    }
                    for p in peaks
                ],
                "table",
            )
        )
        _print_invoice_trail(store, conn)


def _print_invoice_trail(store: Any, conn: Any) -> None:
    line = (
        conn.execute(
            text(
                "SELECT l.invoice_id, l.line_no, l.job_uid, l.resource, l.billing_mode, "
                "l.quantity, l.unit, l.amount_minor, l.transaction_ids, i.currency, i.workspace, "
                "i.period, i.total_minor FROM billing_invoice_lines l "
                "JOIN billing_invoices i USING (invoice_id) "
                "WHERE l.resource LIKE 'gpu/%' ORDER BY l.amount_minor DESC LIMIT 1"
            )
        )
        .mappings()
        .first()
    )
    _heading("Audit trail: one invoice line back to the Kubernetes events")
    if line is None:
        typer.echo("no invoice issued yet")
        return
    invoices = conn.execute(text("SELECT count(*) FROM billing_invoices")).scalar_one()
    typer.echo(
        f"{invoices} invoices issued; the largest GPU line is on invoice {line['invoice_id']} "
        f"({line['workspace']}, {line['period']}, total "
        f"{format_minor(line['total_minor'], 2, line['currency'])}):"
    )
    typer.echo(
        f"  line {line['line_no']}: job {line['job_uid']}, {line['resource']} "
        f"{line['billing_mode']}, {line['quantity']} {line['unit']} = "
        f"{format_minor(line['amount_minor'], 2, line['currency'])}"
    )
    txn_ids = list(line["transaction_ids"])
    postings = conn.execute(
        text(
            "SELECT data, position FROM events WHERE type = 'LedgerTransactionPosted' "
            "AND data->>'transaction_id' = ANY(:ids) ORDER BY position"
        ),
        {"ids": txn_ids},
    ).all()
    cause_ids: list[str] = []
    for data, position in postings:
        amounts = ", ".join(f"{p['account']} {p['amount_minor']:+d}" for p in data["postings"])
        typer.echo(
            f"  <- ledger transaction {data['transaction_id']} (store position {position}, "
            f"period {data.get('period')}): {amounts}"
        )
        cause_ids += [c for c in data["cause_event_ids"] if c not in cause_ids]
    causes = conn.execute(
        text(
            "SELECT position, type, occurred_at, source, data FROM events "
            "WHERE event_id = ANY(CAST(:ids AS uuid[])) ORDER BY position"
        ),
        {"ids": cause_ids},
    ).all()
    for position, type_, occurred_at, source, data in causes:
        what = (
            f"pod {data.get('pod_name') or data.get('pod_uid')} on node {data.get('node')}, "
            f"{data.get('mgpu')} mGPU"
            if type_ == "OccupancyStarted"
            else f"reason {data.get('reason')}, estimated={data.get('estimated')}"
        )
        typer.echo(
            f"  <- {type_} at {occurred_at:%Y-%m-%d %H:%M:%S}Z (store position {position}, "
            f"from {source}): {what}"
        )
    typer.echo(
        f"  inspect: dlc-ledger invoices show {line['invoice_id']} ; "
        f"dlc-ledger jobs show {line['job_uid']} ; dlc-ledger verify"
    )
