"""``dlc-ledger jobs …`` (``jobs why`` explains the dispatcher's view of one job) and the
cluster reports ``report occupancy`` / ``report inventory``.

Read-only views over the jobs, occupancy and inventory projections (run
``dlc-ledger project`` first to bring them up to date). Every command prints a
table or, with ``--format json`` (the reports also ``csv``), machine-readable rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer

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
from dlc_ledger.presenters import with_amounts
from dlc_ledger.wiring import context
from projections.billing import currency_scales
from projections.inventory import GROUP_KEYS, INVENTORY_GROUP_KEYS, capacity_at, occupied_at
from projections.jobs import find_job, job_detail, list_jobs
from projections.names import job_users, job_workspaces

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
    store = context.open_reader()
    with store.reading() as conn:
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
    store = context.open_reader()
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
    store = context.open_reader()
    with store.reading() as conn:
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
    store = context.open_reader()
    with store.reading() as conn:
        rows = capacity_at(conn, instant, keys)
    emit_rows(rows, fmt)  # not typer.echo: off a terminal it strips escape codes from CSV


def _quantities(request: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_cell(v)}" for k, v in sorted(request.items())) or "-"


_WHY_HEAD = ("job_uid", "name", "status", "status_since", "quota", "workspace", "priority",
             "billing_mode", "now")  # fmt: skip
_FIGURES = ("quota", "key", "request", "min", "max", "used", "available", "capacity", "short")
_PREEMPTIONS = ("decided_at", "preemptor", "preemptor_name", "preemptor_priority",
                "preemptor_quota", "rule", "lost_gpu_hours", "lost_cost", "currency")  # fmt: skip


@jobs_app.command("why")
def jobs_why(
    job: Annotated[str, typer.Argument(help="Job uid, or its name if only one job has it.")],
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="As at this instant: the jobs pending and admitted then, their waits, "
            f"aging and estimates. Default: the latest projected instant. {CLUSTER}.",
        ),
    ] = None,
    fmt: DocumentFormatOption = DocumentFormat.table,
) -> None:
    """Why a job is pending (reason, place in its queue and tree, the quota figures that
    block it, estimated start) or was preempted (by whom, which rule, the quota state then,
    GPU-hours lost and their cost); for a running or finished job, its admission."""
    # the dispatcher's reads and core, imported by this command only (jobs show starts faster)
    from dlc_ledger.services.dispatch import why_job
    from projections.dispatch import jsonable

    instant = parse_instant(at, option="--at") if at else None
    store = context.open_reader()
    doc = why_job(store, job, at=instant)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    doc["preemptions"] = [
        with_amounts([p], fmt.value, scale_of)[0] if p.get("currency") else p
        for p in doc["preemptions"]
    ]
    if fmt is DocumentFormat.json:
        typer.echo(_dumps(jsonable(doc)))
        return
    width = max(len(k) for k in _WHY_HEAD)
    typer.echo(f"{'summary'.ljust(width)}  {_cell(doc['summary'])}")
    for key in _WHY_HEAD:
        typer.echo(f"{key.ljust(width)}  {_cell(doc.get(key))}")
    if doc.get("pending"):
        _print_pending(doc["pending"], doc["quota"])
    stopped = doc.get("stopped")
    if stopped:
        typer.echo(
            f"\nstopped: {_cell(stopped['decided_at'])} by the dispatcher, {stopped['reason']}: "
            f"ran {_cell(stopped['ran_seconds'])} s of at most "
            f"{_cell(stopped['max_run_seconds'])} s"
        )
    admission = doc.get("admission")
    if admission:
        borrowing = " (borrowing)" if admission["borrowing"] else ""
        typer.echo(
            f"\nadmitted: {_cell(admission['decided_at'])} in quota "
            f"{_cell(admission['quota'])}{borrowing}"
        )
    if doc["preemptions"]:
        typer.echo("\npreempted (GPU-hours lost: its pods' time since their last start):")
        typer.echo(render_table(doc["preemptions"], _PREEMPTIONS))
        for p in doc["preemptions"]:
            typer.echo(f"- {_cell(p['decided_at'])} {p['rule']}: {p['rule_text']}")
            for quota, figures in sorted(p["state"].items()):
                typer.echo(f"  quota state then, {_cell(quota)}: {_cell(json.dumps(figures))}")


def _print_pending(pending: dict[str, Any], quota: str | None) -> None:
    reason = pending["reason"] or "fits now"
    typer.echo(f"\nwhy pending: {reason}: {pending['reason_text']}")
    if pending["position"] is not None:
        typer.echo(
            f"position: {pending['position']} of {pending['queue_length']} in quota "
            f"{_cell(quota)}; {pending['cohort_position']} of {pending['cohort_length']} "
            "in its tree (cohort)"
        )
    typer.echo(
        f"queued at {_cell(pending['queued_at'])}, waited "
        f"{_cell(round(pending['waited_seconds']))} s; priority {pending['priority']} "
        f"(effective {pending['effective_priority']}); request {_quantities(pending['request'])}"
    )
    est = pending["estimate"] or {}
    typer.echo(f"estimated start: {_cell(est.get('start'))} ({pending['estimate_method']})")
    if est.get("low") is not None:
        high = _cell(est["high"]) if est.get("high") is not None else "later (no upper bound)"
        typer.echo(f"likely between: {_cell(est['low'])} and {high}")
    last = pending.get("last_decision")
    if last:
        typer.echo(
            f"dispatcher's last pending decision: {_cell(last['reason'])} at "
            f"{_cell(last['decided_at'])}"
        )
    typer.echo("\nquota figures (its quota first, then its ancestors; short: does not fit now):")
    typer.echo(render_table(pending["figures"], _FIGURES))
