"""``dlc-ledger services list|show`` and ``dlc-ledger notebooks list``: the inference services
and notebook instances that share the quotas with training (docs/workloads.md).

Read-only, over the jobs view (a workload folds there as one row: kind Deployment,
StatefulSet or LeaderWorkerSet, framework ``service`` or ``notebook``), its stream (the
desired replicas over time) and the billing view (its cost).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from dlc_ledger.cli.options import CursorOption, LimitOption, print_next_cursor, require_known
from dlc_ledger.cli.tables import DocumentFormat, DocumentFormatOption, render_table
from dlc_ledger.cli.tables import cell as _cell
from dlc_ledger.presenters import with_amounts
from dlc_ledger.wiring import context
from projections.billing import currency_scales, replica_billing
from projections.jobs import list_jobs, workload_detail
from projections.names import job_workspaces

__all__ = ["notebooks_app", "services_app"]

services_app = typer.Typer(
    help="Inference services: replicas over time, occupancy, cost, quota.", no_args_is_help=True
)
notebooks_app = typer.Typer(help="Notebook instances.", no_args_is_help=True)

_COLUMNS = ["job_uid", "name", "kind", "workspace", "quota", "user", "status", "replicas"]


def _desired(job: dict[str, Any]) -> Any:
    """The desired replicas now (the jobs view keeps them current through every scale)."""
    specs = job.get("replicas") or []
    return specs[0].get("replicas", specs[0].get("count")) if specs else None


def _list(workload: str, workspace: str | None, limit: int, cursor: str | None, fmt: Any) -> None:
    store = context.open_reader()
    with store.reading() as conn:
        page = list_jobs(
            conn, workspace=workspace, limit=limit, cursor=cursor, frameworks=(workload,)
        )
        if not page.jobs:
            require_known("workspace", workspace, job_workspaces(conn), option="--workspace")
    rows = [{**job, "replicas": _desired(job)} for job in page.jobs]
    if fmt is DocumentFormat.json:
        typer.echo(json.dumps(rows, indent=2, default=str))
    else:
        typer.echo(render_table(rows, _COLUMNS))
    print_next_cursor(page.next_cursor)


WorkspaceOption = Annotated[str | None, typer.Option(help="Only this workspace.")]


@services_app.command("list")
def services_list(
    workspace: WorkspaceOption = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """Services, newest first, with their desired replicas now."""
    _list("service", workspace, limit, cursor, fmt)


@notebooks_app.command("list")
def notebooks_list(
    workspace: WorkspaceOption = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """Notebook instances, newest first."""
    _list("notebook", workspace, limit, cursor, fmt)


@services_app.command("show")
def services_show(
    service: Annotated[str, typer.Argument(help="Service uid, or its name if only one has it.")],
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """One service: its replicas over time, occupied resources, cost and quota."""
    store = context.open_reader()
    with store.snapshot() as uow:
        detail = workload_detail(uow, service)
        scale_of = currency_scales(uow.connection)
        billed = replica_billing(uow.connection, detail["job_uid"])
    history = detail["replica_history"]
    cost = with_amounts(detail["cost"], fmt.value, scale_of)
    shown = {
        k: detail.get(k)
        for k in ("job_uid", "name", "namespace", "kind", "framework", "workspace", "quota")
    } | {
        "user": detail.get("user"),
        "status": detail.get("status"),
        "replicas": _desired(detail),
        "billing_mode": detail.get("billing_mode"),
    }
    if fmt is DocumentFormat.json:
        out = shown | {
            "replica_history": history,
            "occupied_history": detail["occupied_history"],
            "occupied": detail["occupied"],
            "replicas_billed": billed,
            "cost": cost,
        }
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    width = max(len(k) for k in shown)
    for key, value in shown.items():
        typer.echo(f"{key.ljust(width)}  {_cell(value)}")
    typer.echo("\nreplicas over time:")
    typer.echo(render_table(history, ["at", "change", "replicas", "by"]))
    typer.echo("\nreplica pods running over time:")
    typer.echo(render_table(detail["occupied_history"], ["at", "pods"]))
    typer.echo("\noccupied (closed occupancies):")
    typer.echo(render_table(detail["occupied"]))
    typer.echo("\nreplicas as billed (quota: prepaid; public: beyond the quota, pay-as-you-go):")
    typer.echo(render_table(billed))
    typer.echo("\ncost (posted to the ledger; rated: its facts rated up to the cluster clock):")
    typer.echo(render_table(cost))
