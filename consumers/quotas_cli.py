"""``dlc-ledger quotas apply|list|show``, ``dlc-ledger report quota-usage|quota-history``.

``apply`` works like ``kubectl apply``: it brings the quota projection up to date,
diffs the file against the projected tree, and appends only the differences as
events (streams ``quota/<id>`` and ``workspace/<id>``, source ``api/<$USER>``). Event
ids are deterministic over (stream, its version before the change, what changes), and
the append expects those stream versions, so two concurrent applies cannot both win.
Applying the same file twice appends nothing the second time.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from consumers import context
from consumers.clocks import observed_cluster_time
from consumers.finance_cli import emit
from consumers.jobs_cli import Format
from consumers.options import CLUSTER, check_window, parse_instant, require_known
from consumers.projector import catch_up_to_read
from consumers.tables import FormatOption as RowFormatOption
from consumers.tables import RowFormat, escape_controls, render_table
from ledger.canonical import format_timestamp
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.events import QuotaChanged, QuotaCreated, QuotaDeleted, QuotaSpec, WorkspaceBound
from ledger.ids import deterministic_id
from ledger.quotas import (
    QuotaTree,
    diff,
    keep_absent,
    parse_quota_tree,
    resource_unit,
    spec_hash,
)
from ledger.store.postgres import PostgresEventStore
from ledger.usage_boards import NUMBERS
from projections.names import quota_flavors, quota_names
from projections.quota_reads import (
    STEPS,
    quota_tree,
    series_points,
    usage_at,
    usage_history,
    usage_series,
)
from projections.quotas import QuotaProjection

__all__ = ["ApplyResult", "apply_quota_file", "describe", "quota_envelopes", "quotas_app"]

quotas_app = typer.Typer(
    help="Quota tree: apply a YAML file, list, show usage.", no_args_is_help=True
)

FormatOption = Annotated[Format, typer.Option("--format", help="table or json.")]


def _principal() -> str:
    user = os.environ.get("USER")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
    return user


def _stream(event: EventData) -> tuple[str, str]:
    """(stream, what-changes digest) of one apply event."""
    if isinstance(event, (QuotaCreated, QuotaChanged)):
        return f"quota/{event.spec.quota_id}", spec_hash(event.spec)
    if isinstance(event, QuotaDeleted):
        return f"quota/{event.quota_id}", "deleted"
    if isinstance(event, WorkspaceBound):
        return f"workspace/{event.workspace}", event.quota or "-"
    raise TypeError(f"not an apply event: {type(event).__name__}")


def quota_envelopes(
    store: PostgresEventStore,
    events: list[EventData],
    *,
    at: datetime,
    source: str,
) -> tuple[list[Envelope], dict[str, int]]:
    """Envelopes for ``events`` and the stream versions the append must find."""
    expected: dict[str, int] = {}
    envelopes: list[Envelope] = []
    for event in events:
        stream, digest = _stream(event)
        if stream not in expected:
            expected[stream] = store.stream_version(stream)
        version = expected[stream] + sum(1 for e in envelopes if e.stream == stream)
        event_id = deterministic_id("apply", stream, str(version), event.type_name, digest)
        envelopes.append(
            make_envelope(
                event,
                event_id=event_id,
                stream=stream,
                occurred_at=at,
                observed_at=at,
                source=source,
            )
        )
    return envelopes, expected


def _catch_up(store: PostgresEventStore) -> None:
    catch_up_to_read(store, [QuotaProjection()])


def _current(store: PostgresEventStore) -> QuotaTree:
    _catch_up(store)
    with store.engine.connect() as conn:
        return quota_tree(conn)


def _quantities(values: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def _changes(old: QuotaSpec, new: QuotaSpec) -> str:
    parts = []
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    for field in ("parent", "min", "max", "lend_limit", "preemption", "queue_policy"):
        if a[field] != b[field]:
            if isinstance(a[field], dict) and isinstance(b[field], dict):
                for key in sorted(set(a[field]) | set(b[field])):
                    if a[field].get(key) != b[field].get(key):
                        parts.append(
                            f"{field}.{key} {a[field].get(key, '-')} -> {b[field].get(key, '-')}"
                        )
            else:
                parts.append(f"{field} {a[field]} -> {b[field]}")
    return "; ".join(parts)


def describe(current: QuotaTree, event: EventData) -> str:
    """One human line per apply event."""
    if isinstance(event, QuotaCreated):
        s = event.spec
        return (
            f"created quota {s.quota_id} (parent {s.parent or '-'}; "
            f"min {_quantities(s.min)}; max {_quantities(s.max)})"
        )
    if isinstance(event, QuotaChanged):
        return (
            f"changed quota {event.spec.quota_id}: "
            f"{_changes(current.specs[event.spec.quota_id], event.spec)}"
        )
    if isinstance(event, QuotaDeleted):
        return f"deleted quota {event.quota_id}"
    if isinstance(event, WorkspaceBound):
        was = current.bindings.get(event.workspace, "-")
        if event.quota is None:
            return f"unbound workspace {event.workspace} (was {was})"
        return f"bound workspace {event.workspace} to {event.quota} (was {was})"
    return type(event).__name__


@dataclass(frozen=True)
class ApplyResult:
    """What an apply did (or, dry-run, would do)."""

    lines: list[str]  # one human line per event
    events: list[Envelope]  # appended, or (dry-run) that would be
    # absent from the file and not pruned:
    kept_quotas: list[str] = dataclasses.field(default_factory=list)
    kept_bindings: list[str] = dataclasses.field(default_factory=list)


def apply_quota_file(
    store: PostgresEventStore,
    text: str,
    *,
    at: datetime | None = None,
    dry_run: bool = False,
    prune: bool = False,
    user: str | None = None,
) -> ApplyResult:
    """Diff ``text`` against the projected tree; append the differences unless dry-run.

    Quotas and workspace bindings the file leaves out are kept unless ``prune``; the
    events take effect at ``at`` (cluster time; default now).
    """
    desired = parse_quota_tree(text)
    current = _current(store)
    kept_quotas: list[str] = []
    kept_bindings: list[str] = []
    if not prune:
        desired, kept_quotas, kept_bindings = keep_absent(current, desired)
    events = diff(current, desired)
    lines = [describe(current, e) for e in events]
    envelopes: list[Envelope] = []
    if events:
        envelopes, expected = quota_envelopes(
            store, events, at=at or datetime.now(UTC), source=f"api/{user or _principal()}"
        )
        if not dry_run:
            store.append(envelopes, expected_versions=expected)
            _catch_up(store)
    return ApplyResult(lines, envelopes, kept_quotas, kept_bindings)


def _lands_inside_history(store: PostgresEventStore, at: datetime) -> str | None:
    """A warning when ``at`` falls before cluster facts already stored (a replay's
    history lies in virtual time, often ahead of the wall clock)."""
    observed = observed_cluster_time(store)
    if observed is None or observed <= at:
        return None
    return (
        f"note: the store holds cluster facts up to {format_timestamp(observed)}, after "
        f"{format_timestamp(at)}: the change takes effect inside that history "
        "(pass --effective-at to place it, e.g. at a replay's start)"
    )


@quotas_app.command("apply")
def apply(
    file: Annotated[Path, typer.Argument(help="Quota tree YAML (see ops/quotas/demo.yaml).")],
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
    at: Annotated[
        str | None,
        typer.Option(
            "--effective-at",
            "--at",
            help=f"When the change takes effect (default now), e.g. a replay's epoch: {CLUSTER}.",
        ),
    ] = None,
) -> None:
    """Make the quota tree match FILE: append only the differences (idempotent)."""
    try:
        text = file.read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from exc
    store = context.open_store()
    when = parse_instant(at, option="--effective-at") if at else datetime.now(UTC)
    result = apply_quota_file(store, text, at=when, dry_run=dry_run, prune=prune)
    if at is None and result.events:
        warning = _lands_inside_history(store, when)
        if warning:
            typer.echo(warning, err=True)
    if not result.lines:
        typer.echo("no changes")
    for line, envelope in zip(result.lines, result.events, strict=True):
        if dry_run:
            typer.echo(
                f"would append {envelope.type} to {envelope.stream} at "
                f"{format_timestamp(envelope.occurred_at)}: {line}"
            )
        else:
            typer.echo(line)
    if result.lines:
        typer.echo(
            f"would apply {len(result.lines)} change(s); appended nothing (--dry-run)"
            if dry_run
            else f"applied {len(result.lines)} change(s)"
        )
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
def list_quotas(fmt: FormatOption = Format.table) -> None:
    """Every quota node: parent, min, max, bound workspaces."""
    tree = _current(context.open_store())
    rows: list[dict[str, Any]] = []
    from ledger.quotas import topological_order

    for name in topological_order(tree.specs):
        spec = tree.specs[name]
        rows.append(
            {
                "quota": name,
                "parent": spec.parent,
                "min": spec.min if fmt is Format.json else _quantities(spec.min),
                "max": spec.max if fmt is Format.json else _quantities(spec.max),
                "workspaces": tree.workspaces_of(name)
                if fmt is Format.json
                else ",".join(tree.workspaces_of(name)) or "-",
            }
        )
    if fmt is Format.json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(render_table(rows))


@quotas_app.command("show")
def show(quota: str, fmt: FormatOption = Format.table) -> None:
    """One quota: spec, bound workspaces, current usage per flavor."""
    store = context.open_store()
    tree = _current(store)
    spec = tree.specs.get(quota)
    if spec is None:
        raise typer.BadParameter(
            f"no quota named {quota!r}; known: {', '.join(sorted(tree.specs))}"
        )
    with store.engine.connect() as conn:
        usage = usage_at(conn, quota=quota)
    if fmt is Format.json:
        typer.echo(
            json.dumps(
                {
                    "spec": spec.model_dump(mode="json"),
                    "workspaces": tree.workspaces_of(quota),
                    "usage": [_usage_json(u.as_json()) for u in usage],
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
    typer.echo(f"min         {_quantities(spec.min)}")
    typer.echo(f"max         {_quantities(spec.max)}")
    typer.echo(f"lend_limit  {_quantities(spec.lend_limit)}")
    p = spec.preemption
    typer.echo(
        f"preemption  within_quota={p.within_quota} reclaim={p.reclaim} "
        f"borrow_within={p.borrow_within.policy}"
    )
    typer.echo(f"queue       {spec.queue_policy}")
    typer.echo("")
    typer.echo(render_table([_usage_table(u.as_json()) for u in usage]))


_KEYS = ("quota", "flavor", *NUMBERS)


def _usage_json(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in _KEYS}
    out["unit"] = resource_unit(row["flavor"]) if row["flavor"] else ""
    out["at"] = format_timestamp(row["at"])
    return out


def _usage_table(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in _KEYS}
    out["unit"] = resource_unit(row["flavor"])
    return out


def quota_usage_report(
    at: Annotated[
        str | None, typer.Option("--at", help=f"Instant (default: latest): {CLUSTER}.")
    ] = None,
    fmt: RowFormatOption = RowFormat.table,
) -> None:
    """Per quota node x flavor: min, max, used, borrowed, lent, queued demand, job counts."""
    instant = parse_instant(at, option="--at") if at else None
    store = context.open_store()
    _catch_up(store)
    with store.engine.connect() as conn:
        rows = usage_at(conn, instant)
    if fmt is RowFormat.table:
        typer.echo(render_table([_usage_table(r.as_json()) for r in rows]))
    else:
        emit([_usage_json(r.as_json()) for r in rows], fmt)


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
        raise ValueError(f"--step {step!r}: use hour, day or change")
    start = parse_instant(since, option="--from") if since else None
    end = parse_instant(until, option="--to") if until else None
    check_window(start, end, inclusive=True)
    store = context.open_store()
    _catch_up(store)
    with store.engine.connect() as conn:
        require_known("quota", quota, quota_names(conn), option="--quota")
        require_known("flavor", flavor, quota_flavors(conn), option="--flavor")
        if step == "change":
            rows = usage_history(conn, since=start, until=end, quota=quota, flavor=flavor)
        else:
            points = series_points(conn, step, start, end)
            rows = usage_series(conn, points, step, quota=quota, flavor=flavor)
    if fmt is RowFormat.table:
        table = [{"at": format_timestamp(r.at), **_usage_table(r.as_json())} for r in rows]
        if step == "change":
            table = [{**t, "deleted": r.deleted} for t, r in zip(table, rows, strict=True)]
        typer.echo(render_table(table))
        return
    out = [_usage_json(r.as_json()) for r in rows]
    if step == "change":
        out = [{**o, "deleted": r.deleted} for o, r in zip(out, rows, strict=True)]
    emit(out, fmt)
