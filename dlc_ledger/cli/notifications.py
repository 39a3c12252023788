"""``dlc-ledger notifications``: the workspace event centre (docs/notifications.md).

``apply`` sets the rules from a file (idempotent, ``--dry-run``, ``--effective-at``);
``rules list`` shows them; ``send`` is the long-running component that matches stored
facts against the rules and delivers (``--until-idle``: what is due, then exit);
``deliveries``, ``retry`` and ``test`` operate it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from dlc_ledger.cli.applies import echo_applied
from dlc_ledger.cli.options import EffectiveAtOption, parse_instant
from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.notifications import (
    apply_rules_file,
    delivery_rows,
    grant_rows,
    grant_secret,
    retry,
    revoke_secret,
    rule_rows,
)
from dlc_ledger.wiring import context
from ledger.errors import Conflict, NotFound
from ledger.notifications import AllowList

__all__ = ["notifications_app"]

notifications_app = typer.Typer(
    help="The event centre: rules on job, quota, budget and subscription events; delivery.",
    no_args_is_help=True,
)
rules_app = typer.Typer(help="The rules as applied.", no_args_is_help=True)
notifications_app.add_typer(rules_app, name="rules")
secrets_app = typer.Typer(
    help="Which of the sender's environment variables each workspace's rules may name.",
    no_args_is_help=True,
)
notifications_app.add_typer(secrets_app, name="secrets")


@notifications_app.command("apply")
def apply(
    file: Annotated[Path, typer.Argument(help="Rules YAML: rules: [{name, workspace, ...}].")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the changes; append nothing.")
    ] = False,
    at: EffectiveAtOption = None,
) -> None:
    """Make the rules of the file's workspaces match FILE: only the differences are stored."""
    try:
        text = file.read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from exc
    store = context.open_store()
    when = parse_instant(at, option="--effective-at") if at else None
    result = apply_rules_file(
        store,
        text,
        principal=context.local_principal(),
        at=when,
        dry_run=dry_run,
        allow=_allow(),
    )
    echo_applied(result.lines, result.events, dry_run=dry_run)


@rules_app.command("list")
def rules_list(
    workspace: Annotated[str | None, typer.Option("--workspace", help="Only this one.")] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """Every rule as applied last: events, filters, limits, target (never a secret)."""
    rows = rule_rows(context.open_reader(), workspace)
    if fmt is RowFormat.table:
        rows = [
            {
                **r,
                "events": ",".join(r["events"]),
                "filters": _pairs(r["filters"]),
                "limits": _pairs(r["limits"]),
            }
            for r in rows
        ]
    emit_rows(rows, fmt)


def _allow() -> AllowList:
    return AllowList.parse(context.settings().webhook_allow)


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "-"


@notifications_app.command("send")
def send(
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help="Send what is due now, then exit.")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Seconds between rounds.")
    ] = 1.0,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Serve Prometheus /metrics on this port, 0 = off.")
    ] = 0,
) -> None:
    """Match stored facts against the rules and deliver, until Ctrl-C (or idle).

    Time-based rules are evaluated at the cluster's clock (a replay's virtual one), retries
    and signatures on the wall clock."""
    from consumers.metrics import serve_metrics
    from consumers.notifications import serve, step
    from dlc_ledger.wiring.signals import stop_on_signals

    store = context.open_store()
    allow = _allow()
    if until_idle:
        total = 0
        while True:
            matched, sent = step(store, billing_instant(store, None).at, allow=allow)
            total += len(sent.delivered)
            if not sent.attempted and not matched.queued:
                break
        typer.echo(f"delivered {total} notification(s); nothing more is due")
        return
    stop = threading.Event()
    stop_on_signals(stop)  # SIGTERM (a pod's stop): the round in hand finishes first
    serve_metrics(metrics_port or context.settings().metrics_port)

    def report(matched: Any, sent: Any) -> None:
        if matched.queued or sent.attempted:
            typer.echo(
                f"{datetime.now(UTC):%H:%M:%S} queued {matched.queued}, delivered "
                f"{len(sent.delivered)}, retrying {len(sent.retried)}, failed {len(sent.failed)}"
            )

    try:
        serve(
            store,
            stop,
            lambda: billing_instant(store, None).at,
            interval=interval,
            on_step=report,
            allow=allow,
        )
    except KeyboardInterrupt:
        stop.set()


@notifications_app.command("deliveries")
def deliveries_command(
    failed: Annotated[bool, typer.Option("--failed", help="Only those given up.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 100,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """The latest notifications: rule, event, target, status, attempts, last error, latency."""
    rows = delivery_rows(context.open_reader(), failed=failed, limit=limit)
    if fmt is RowFormat.table:
        keep = (
            "notification_id",
            "rule",
            "event_type",
            "target",
            "status",
            "attempts",
            "last_error",
            "finished_at",
            "latency_ms",
        )
        rows = [{k: r[k] for k in keep} for r in rows]
    emit_rows(rows, fmt)


@notifications_app.command("retry")
def retry_command(notification_id: Annotated[str, typer.Argument()]) -> None:
    """Queue a notification again (it keeps its webhook-id), due now."""
    before = retry(context.open_store(), notification_id)
    typer.echo(f"queued {notification_id} again (was {before})")


@notifications_app.command("test")
def test_command(
    rule: Annotated[str, typer.Argument(help="The rule's name.")],
    workspace: Annotated[str, typer.Option("--workspace", help="The rule's workspace.")],
) -> None:
    """Send a sample notification through RULE's target now (nothing is stored)."""
    from consumers.notifications import Message, deliver
    from dlc_ledger.services.notifications import rule_rows as rules

    found = [r for r in rules(context.open_reader(), workspace) if r["name"] == rule]
    if not found:
        raise NotFound(
            f"no rule {rule!r} in workspace {workspace!r} (see: notifications rules list)"
        )
    r = found[0]
    variable = r["secret_env"] or r["target"].removeprefix("apprise:")
    if variable not in {g["variable"] for g in grant_rows(context.open_reader(), workspace)}:
        raise Conflict(f"{variable} is not granted to {workspace}: nothing was sent")
    now = datetime.now(UTC)
    message = Message(
        notification_id=f"test-{int(now.timestamp())}",
        target=r["target"],
        secret_env=r["secret_env"],
        event_type="test.sample",
        subject=f"test of rule {rule} ({workspace})",
        payload={"event": "Test", "rule": f"{workspace}/{rule}", "workspace": workspace},
    )
    attempt = deliver(message, now, allow=_allow())
    if not attempt.ok:
        raise NotFound(f"the sample was not delivered: {attempt.error}")
    typer.echo(f"delivered a sample to {r['target']}")


@secrets_app.command("grant")
def secrets_grant(
    workspace: Annotated[str, typer.Argument(help="The workspace ('*': the admins' rules).")],
    variable: Annotated[str, typer.Argument(help="The sender's environment variable.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Store nothing.")] = False,
) -> None:
    """Let WORKSPACE's rules name VARIABLE (a webhook secret or an apprise URL)."""
    changed = grant_secret(
        context.open_store(),
        workspace,
        variable,
        principal=context.local_principal(),
        dry_run=dry_run,
    )
    typer.echo(changed.line + (" (dry run)" if dry_run and changed.events else ""))


@secrets_app.command("revoke")
def secrets_revoke(
    workspace: Annotated[str, typer.Argument()],
    variable: Annotated[str, typer.Argument()],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Store nothing.")] = False,
) -> None:
    """Take VARIABLE back from WORKSPACE: its rules' deliveries through it fail from now."""
    changed = revoke_secret(
        context.open_store(),
        workspace,
        variable,
        principal=context.local_principal(),
        dry_run=dry_run,
    )
    typer.echo(changed.line + (" (dry run)" if dry_run else ""))


@secrets_app.command("list")
def secrets_list(
    workspace: Annotated[str | None, typer.Option("--workspace", help="Only this one.")] = None,
    fmt: FormatOption = RowFormat.table,
) -> None:
    """The grants in force: workspace and variable."""
    emit_rows(grant_rows(context.open_reader(), workspace), fmt)
