"""``dlc-ledger quotas apply|list|show``, ``dlc-ledger report quota-usage|quota-history``.

``apply`` works like ``kubectl apply``: it brings the quota projection up to date,
diffs the file against the projected tree, and appends only the differences as
events (streams ``quota/<id>`` and ``workspace/<id>``, source ``api/<$USER>``). Event
ids are deterministic over (stream, its version before the change, what changes), and
the append expects those stream versions, so two concurrent applies cannot both win.
Applying the same file twice appends nothing the second time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from dlc_ledger.cli.applies import echo_applied
from dlc_ledger.cli.options import (
    CLUSTER,
    EffectiveAtOption,
    check_window,
    parse_instant,
    parse_optional_instant,
    require_known,
)
from dlc_ledger.cli.tables import (
    DocumentFormat,
    DocumentFormatOption,
    RowFormat,
    emit_rows,
    escape_controls,
    render_table,
)
from dlc_ledger.cli.tables import FormatOption as RowFormatOption
from dlc_ledger.presenters import (
    node_row,
    series_row,
    usage_json,
    usage_table,
    with_amounts,
    with_kinds,
)
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.quotas import (
    apply_quota_file,
    current_tree,
    format_quantities,
    lands_inside_history,
    over_capacity_quotas,
)
from dlc_ledger.wiring import context
from ledger.canonical import format_timestamp
from ledger.errors import Invalid
from projections.billing import ReportWindow, currency_scales
from projections.names import quota_flavors, quota_names
from projections.quotas import (
    STEPS,
    quota_nodes_at,
    series_points,
    usage_at,
    usage_history,
    usage_series,
    used_by_kind,
)

__all__ = ["quotas_app"]

quotas_app = typer.Typer(
    help="Quota tree: apply a YAML file, list, show usage.", no_args_is_help=True
)


@quotas_app.command("apply")
def apply(
    file: Annotated[
        Path, typer.Argument(help="Quota tree YAML (see dlc_ledger/resources/quotas/demo.yaml).")
    ],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the events that would be appended, append none."),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Delete the quotas and unbind the workspaces the file leaves out "
            "(default: keep them).",
        ),
    ] = False,
    at: EffectiveAtOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Apply a tree whose guarantees exceed the subscribed capacity of the "
            "resource groups they name (the shortfall is printed).",
        ),
    ] = False,
) -> None:
    """Make the quota tree match FILE: append only the differences (idempotent)."""
    try:
        text = file.read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from exc
    store = context.open_store()
    when = parse_instant(at, option="--effective-at") if at else datetime.now(UTC)
    result = apply_quota_file(
        store,
        text,
        principal=context.local_principal(),
        at=when,
        dry_run=dry_run,
        prune=prune,
        force=force,
    )
    for problem in result.over_capacity:
        typer.echo(f"warning: over subscribed capacity (--force): {problem}", err=True)
    if at is None and result.events:
        warning = lands_inside_history(store, when)
        if warning:
            typer.echo(warning, err=True)
    echo_applied(result.lines, result.events, dry_run=dry_run)
    kept = [f"quota {q}" for q in result.kept_quotas] + [
        f"workspace {w}" for w in result.kept_bindings
    ]
    if kept:
        more = f" and {len(kept) - _NAMED} more" if len(kept) > _NAMED else ""
        typer.echo(
            f"kept {len(result.kept_quotas)} quota(s) and {len(result.kept_bindings)} workspace "
            f"binding(s) the file leaves out (--prune would delete them): "
            f"{', '.join(kept[:_NAMED])}{more}"
        )


_NAMED = 10  # kept nodes named in apply's summary line


@quotas_app.command("list")
def list_quotas(
    fmt: DocumentFormatOption = DocumentFormat.table,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help=f"Capacity as of (default: now, or a replayed cluster's clock): {CLUSTER}.",
        ),
    ] = None,
) -> None:
    """Every quota node: parent, min, max, bound workspaces, the resource groups it draws
    on (its own, or inherited from a parent) and whether its guarantee exceeds what they
    hold now (over: see docs/subscriptions.md)."""
    store = context.open_reader()
    tree = current_tree(store)
    rows: list[dict[str, Any]] = []
    from ledger.quotas import topological_order
    from ledger.subscriptions import drawing_groups

    drawn = drawing_groups(tree.specs)
    when = parse_instant(at, option="--at") if at else billing_instant(store, None).at
    over = over_capacity_quotas(store, when)

    for name in topological_order(tree.specs):
        spec = tree.specs[name]
        rows.append(
            {
                "quota": name,
                "parent": spec.parent,
                "min": spec.min if fmt is DocumentFormat.json else format_quantities(spec.min),
                "max": spec.max if fmt is DocumentFormat.json else format_quantities(spec.max),
                "workspaces": tree.workspaces_of(name)
                if fmt is DocumentFormat.json
                else ",".join(tree.workspaces_of(name)) or "-",
                "resource_groups": list(drawn.get(name, ()))
                if fmt is DocumentFormat.json
                else ",".join(drawn.get(name, ())) or "-",
                "capacity": "over" if name in over else "",
            }
        )
    if fmt is DocumentFormat.json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(render_table(rows))
        for why in sorted(set(over.values())):
            typer.echo(f"over subscribed capacity: {why}", err=True)


@quotas_app.command("show")
def show(quota: str, fmt: DocumentFormatOption = DocumentFormat.table) -> None:
    """One quota: spec, bound workspaces, current usage per flavor."""
    store = context.open_reader()
    tree = current_tree(store)
    spec = tree.specs.get(quota)
    if spec is None:
        raise typer.BadParameter(
            f"no quota named {quota!r}; known: {', '.join(sorted(tree.specs))}"
        )
    with store.reading() as conn:
        usage = usage_at(conn, quota=quota)
    if fmt is DocumentFormat.json:
        typer.echo(
            json.dumps(
                {
                    "spec": spec.model_dump(mode="json"),
                    "workspaces": tree.workspaces_of(quota),
                    "usage": [usage_json(u.as_json()) for u in usage],
                },
                indent=2,
                default=str,
            )
        )
        return
    children = sorted(n for n, s in tree.specs.items() if s.parent == quota)
    typer.echo(escape_controls(f"quota       {quota}"))
    typer.echo(escape_controls(f"parent      {spec.parent or '-'}"))
    typer.echo(escape_controls(f"children    {', '.join(children) or '-'}"))
    typer.echo(escape_controls(f"workspaces  {', '.join(tree.workspaces_of(quota)) or '-'}"))
    typer.echo(f"min         {format_quantities(spec.min)}")
    typer.echo(f"max         {format_quantities(spec.max)}")
    typer.echo(f"lend_limit  {format_quantities(spec.lend_limit)}")
    p = spec.preemption
    typer.echo(
        f"preemption  within_quota={p.within_quota} reclaim={p.reclaim} "
        f"borrow_within={p.borrow_within.policy}"
    )
    queue: list[str] = [spec.queue_policy]
    if spec.balance_timeout is not None:
        queue.append(f"balance_timeout={spec.balance_timeout}s")
    if spec.aging_interval is not None:
        queue.append(f"aging_interval={spec.aging_interval}s")
    queue.append(f"on_unfit_head={spec.on_unfit_head}")
    typer.echo(f"queue       {' '.join(queue)}")
    fair = f"weight={spec.fair_sharing_weight}"
    if spec.parent is None:
        fair += f" tree={'on' if spec.fair_sharing else 'off'}"
    typer.echo(f"fair share  {fair}")
    typer.echo("")
    typer.echo(render_table([usage_table(u.as_json()) for u in usage]))


def quota_usage_report(
    at: Annotated[
        str | None, typer.Option("--at", help=f"Instant (default: latest): {CLUSTER}.")
    ] = None,
    by_kind: Annotated[
        bool,
        typer.Option(
            "--by-kind", help="Split used into training, services and notebooks (used_<kind>)."
        ),
    ] = False,
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Per quota node x flavor: min, max, used, borrowed, lent, queued demand, job counts."""
    instant = parse_instant(at, option="--at") if at else None
    store = context.open_reader()
    with store.reading() as conn:
        rows = usage_at(conn, instant)
        # at the instant the rows are at (the latest change when --at is left out)
        kinds = used_by_kind(conn, rows[0].at)[1] if by_kind and rows else None
    shape = usage_table if fmt is RowFormat.table else usage_json
    out = [shape(r.as_json()) for r in rows]
    if kinds is not None:
        out = [
            with_kinds(o, kinds.get((r.quota, r.flavor), {}))
            for o, r in zip(out, rows, strict=True)
        ]
    if fmt is RowFormat.table:
        typer.echo(render_table(out))
    else:
        emit_rows(out, fmt)


def quota_history_report(
    quota: Annotated[str | None, typer.Option("--quota", help="Only this quota node.")] = None,
    flavor: Annotated[
        str | None,
        typer.Option(
            "--flavor",
            help="Only this flavor (gpu/any, cpu, ...); gpu/any also counts the GPU models "
            "a quota does not name (docs/quotas.md).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--from", help=f"Window start: {CLUSTER}."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help=f"Window end (inclusive): {CLUSTER}.")
    ] = None,
    step: Annotated[
        str,
        typer.Option(
            "--step",
            help="day or hour: every quota x flavor at each step's start (a chart's series); "
            "change: every change point (large on a long history).",
        ),
    ] = "day",
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Quota usage over a window of cluster time, for charts: one row per quota node x
    flavor x step, the figures at the step's start (UTC hours or days)."""
    if step not in (*STEPS, "change"):
        raise Invalid(f"--step {step!r}: use hour, day or change")
    start = parse_instant(since, option="--from") if since else None
    end = parse_instant(until, option="--to") if until else None
    check_window(start, end, inclusive=True)
    store = context.open_reader()
    with store.reading() as conn:
        require_known("quota", quota, quota_names(conn), option="--quota")
        require_known("flavor", flavor, quota_flavors(conn), option="--flavor")
        if step == "change":
            rows = usage_history(conn, since=start, until=end, quota=quota, flavor=flavor)
        else:
            points = series_points(conn, step, start, end)
            rows = usage_series(conn, points, step, quota=quota, flavor=flavor)
    if fmt is RowFormat.table:
        table = [{"at": format_timestamp(r.at), **usage_table(r.as_json())} for r in rows]
        if step == "change":
            table = [{**t, "deleted": r.deleted} for t, r in zip(table, rows, strict=True)]
        typer.echo(render_table(table))
        return
    out = [usage_json(r.as_json()) for r in rows]
    if step == "change":
        out = [{**o, "deleted": r.deleted} for o, r in zip(out, rows, strict=True)]
    emit_rows(out, fmt)


@quotas_app.command("tree")
def tree_command(
    at: Annotated[
        str | None, typer.Option("--at", help=f"Instant (default: latest): {CLUSTER}.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--from", help=f"GPU-hours and cost window start (inclusive): {CLUSTER}."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help=f"Window end (exclusive): {CLUSTER}.")
    ] = None,
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Every quota node (leaves and inner nodes) x flavor: min, max, used (and its parts:
    training, services, notebooks), borrowed, lent, lendable now, queued demand, pending
    jobs; with --from/--to, each node's GPU-hours and
    cost over the window (its subtree's leaves summed)."""
    instant = parse_instant(at, option="--at") if at else None
    window = None
    if since is not None or until is not None:
        window = ReportWindow(
            start=parse_optional_instant(since, option="--from"),
            end=parse_optional_instant(until, option="--to"),
        )
        check_window(window.start, window.end)
    store = context.open_reader()
    with store.snapshot() as uow:
        nodes = quota_nodes_at(uow.connection, instant, window)
        scale_of = currency_scales(uow.connection)
        kinds = used_by_kind(uow.connection, nodes.at)[1] if nodes.at is not None else {}
    rows = [
        with_kinds(
            node_row(nodes, f, with_at=fmt is not RowFormat.table),
            kinds.get((f.usage.quota, f.usage.flavor), {}),
        )
        for f in nodes.flavors
    ]
    emit_rows(with_amounts(rows, str(fmt), scale_of), fmt)


def quota_series_report(
    quota: Annotated[str, typer.Argument(help="The quota node (a leaf or an inner node).")],
    since: Annotated[str, typer.Option("--from", help=f"Window start: {CLUSTER}.")],
    until: Annotated[str, typer.Option("--to", help=f"Window end (inclusive): {CLUSTER}.")],
    step: Annotated[str, typer.Option("--step", help="hour or day.")] = "hour",
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """One quota node's usage per flavor at each step's start over a window (a chart's
    series): min, max, used, borrowed, lent, queued demand, pending and running jobs."""
    if step not in STEPS:
        raise Invalid(f"--step {step!r}: use hour or day")
    start = parse_instant(since, option="--from")
    end = parse_instant(until, option="--to")
    check_window(start, end, inclusive=True)
    store = context.open_reader()
    with store.reading() as conn:
        require_known("quota", quota, quota_names(conn), option="QUOTA")
        rows = usage_series(conn, series_points(conn, step, start, end), step, quota=quota)
    emit_rows([series_row(r) for r in rows], fmt)
