"""``dlc-ledger jobs …`` and the cluster reports ``report occupancy`` / ``report inventory``.

Read-only views over the jobs, occupancy and inventory projections (run
``dlc-ledger project`` first to bring them up to date). Every command prints a
table or, with ``--format json`` (the reports also ``csv``), machine-readable rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from dlc_ledger.cli.amounts import currency_scales, with_amounts
from dlc_ledger.cli.options import (
    CLUSTER,
    CursorOption,
    LimitOption,
    parse_instant,
    print_next_cursor,
    require_known,
)
from dlc_ledger.cli.tables import (
    DocumentFormat,
    DocumentFormatOption,
    RowFormat,
    emit_rows,
    render_table,
)
from dlc_ledger.cli.tables import FormatOption as RowFormatOption
from dlc_ledger.cli.tables import cell as _cell
from dlc_ledger.services.billing import sync_billing
from dlc_ledger.wiring import context
from projections.inventory import INVENTORY_GROUP_KEYS, capacity_at
from projections.jobs import find_job, job_detail, list_jobs
from projections.names import job_users, job_workspaces
from projections.occupancy import GROUP_KEYS, occupied_at

__all__ = ["jobs_app", "parse_instant", "render_table"]

jobs_app = typer.Typer(
    help="Jobs: status, requested resources, audit timeline.", no_args_is_help=True
)


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)


def _group_keys(value: str, allowed: Sequence[str]) -> list[str]:
    keys = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in keys if k not in allowed]
    if bad:
        raise typer.BadParameter(
            f"cannot group by {', '.join(bad)}; choose from {', '.join(allowed)}"
        )
    return keys


@jobs_app.command("list")
def jobs_list(
    workspace: Annotated[str | None, typer.Option(help="Only this workspace.")] = None,
    status: Annotated[str | None, typer.Option(help="Only jobs in this status.")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs.")] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help=f"The jobs that existed then, with their status then: {CLUSTER}.",
        ),
    ] = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """Jobs, newest submission first, a page at a time (the next page's cursor goes to stderr)."""
    instant = parse_instant(at, option="--at") if at else None
    store = context.open_store()
    with store.engine.connect() as conn:
        page = list_jobs(
            conn,
            workspace=workspace,
            status=status,
            user=user,
            limit=limit,
            at=instant,
            cursor=cursor,
        )
        if not page.jobs:  # a typo in a name is an error, not "(no rows)"
            require_known("workspace", workspace, job_workspaces(conn), option="--workspace")
            require_known("user", user, job_users(conn), option="--user")
    if fmt is DocumentFormat.json:
        typer.echo(_dumps(page.jobs))
    else:
        columns = ["job_uid", "name", "workspace", "user", "status", "status_since", "restarts"]
        typer.echo(render_table(page.jobs, columns))
    print_next_cursor(page.next_cursor)


@jobs_app.command("show")
def jobs_show(
    job: Annotated[str, typer.Argument(help="Job uid, or its name if only one job has it.")],
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """One job: state, requested and occupied resources, and its full audit timeline."""
    store = context.open_store()
    sync_billing(store)  # the job's cost is read from the billing projection
    with store.snapshot() as uow:
        detail = job_detail(uow, find_job(uow.connection, job))
        scale_of = currency_scales(uow.connection)
    detail["cost"] = with_amounts(detail["cost"], fmt.value, scale_of)
    if fmt is DocumentFormat.json:
        typer.echo(_dumps(detail))
        return
    timeline = detail.pop("timeline")
    occupied = detail.pop("occupied")
    cost = detail.pop("cost")
    width = max(len(k) for k in detail)
    for key, value in detail.items():
        shown = json.dumps(value) if isinstance(value, (dict, list)) else _cell(value)
        typer.echo(f"{key.ljust(width)}  {shown}")
    typer.echo("\noccupied (closed occupancies):")
    typer.echo(render_table(occupied))
    typer.echo("\ncost (posted to the ledger; rated: its facts rated up to the cluster clock):")
    typer.echo(render_table(cost))
    typer.echo("\ntimeline:")
    for entry in timeline:
        entry["arrived"] = "late" if entry["late"] else ""
    typer.echo(
        render_table(
            timeline, ["occurred_at", "position", "arrived", "type", "source", "by", "summary"]
        )
    )
    if any(entry["late"] for entry in timeline):
        typer.echo("(cluster-time order; 'late': stored after a fact that happened later)")


def report_occupancy(
    at: Annotated[str, typer.Option("--at", help=f"Instant: {CLUSTER}.")],
    group_by: Annotated[
        str, typer.Option("--group-by", help=f"Comma-separated: {', '.join(GROUP_KEYS)}.")
    ] = "workspace",
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Resources occupied at an instant (intervals are [start, end)), per group."""
    instant = parse_instant(at, option="--at")
    keys = _group_keys(group_by, GROUP_KEYS)
    if not keys:
        raise typer.BadParameter("--group-by needs at least one key")
    store = context.open_store()
    with store.engine.connect() as conn:
        rows = occupied_at(conn, instant, keys)
    emit_rows(rows, fmt)  # not typer.echo: off a terminal it strips escape codes from CSV


def report_inventory(
    at: Annotated[
        str | None,
        typer.Option("--at", help=f"Instant (default: now, as projected): {CLUSTER}."),
    ] = None,
    group_by: Annotated[
        str,
        typer.Option("--group-by", help=f"Comma-separated: {', '.join(INVENTORY_GROUP_KEYS)}."),
    ] = "pool",
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Nodes and schedulable capacity (cordoned and removed nodes excluded), per group."""
    instant = parse_instant(at, option="--at") if at else None
    keys = _group_keys(group_by, INVENTORY_GROUP_KEYS)
    store = context.open_store()
    with store.engine.connect() as conn:
        rows = capacity_at(conn, instant, keys)
    emit_rows(rows, fmt)  # not typer.echo: off a terminal it strips escape codes from CSV
