"""The event centre as use cases: apply a rule file, list rules and deliveries, retry one.

``apply`` works like ``quotas apply``: it diffs the file against the rules as applied and
appends only the differences (``NotificationRuleSet`` / ``NotificationRuleRemoved``,
stream ``notification-rule/<workspace>/<name>``, ids over the stream's version and the
change), effective at ``at`` (cluster time; default now), so rules applied after a replay
with ``--effective-at`` at its start still see its facts. The workspaces and quotas a rule
may name are those the quota tree knows. Matching and sending are the long-running
component's (``dlc-ledger notifications send``: :mod:`consumers.notifications`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dlc_ledger.services.quotas import current_tree
from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.applies import ApplyChange, apply_envelopes, content_digest
from ledger.envelopes import Envelope
from ledger.errors import NotFound
from ledger.events import NotificationRule, NotificationRuleRemoved, NotificationRuleSet
from ledger.notifications import (
    RuleFileError,
    diff_rules,
    rule_stream,
    rules_from_document,
    target_of,
)
from ledger.store.base import EventStore
from projections.notifications import deliveries, job_workspaces, requeue, rule_book
from projections.registry import catch_up_all

__all__ = [
    "RulesApplied",
    "apply_rules_file",
    "delivery_rows",
    "remove_rule",
    "retry",
    "rule_rows",
    "set_rule",
]


@dataclass(frozen=True)
class RulesApplied:
    lines: list[str]
    events: list[Envelope]


def _known(store: EventStore) -> tuple[set[str], set[str]]:
    tree = current_tree(store)
    workspaces = set(tree.bindings)
    with store.reading() as conn:
        workspaces |= job_workspaces(conn)
    return workspaces, set(tree.specs)


def _describe(event: NotificationRuleSet | NotificationRuleRemoved) -> str:
    if isinstance(event, NotificationRuleRemoved):
        return f"removed rule {event.name} of {event.workspace}"
    rule = event.rule
    return (
        f"set rule {rule.name} of {rule.workspace}: {', '.join(rule.events)} -> {target_of(rule)}"
    )


def apply_rules_file(
    store: EventStore,
    text: str,
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
    admin: bool = True,
) -> RulesApplied:
    """Make the rules of the file's workspaces match it; append only the differences."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise RuleFileError(str(exc)) from None
    workspaces, quotas = _known(store)
    desired = rules_from_document(raw, workspaces=workspaces, quotas=quotas, admin=admin)
    current = rule_book(store).current()
    listed = {w for w, _ in desired} | {
        r.get("workspace") for r in (raw.get("rules") or []) if isinstance(r, dict)
    }
    events = diff_rules(current, desired, [str(w) for w in listed if w])
    return _append_changes(store, events, principal, at, dry_run=dry_run)


def _rule_row(rule: NotificationRule) -> dict[str, Any]:
    filters = {k: getattr(rule, k) for k in ("user", "quota", "billing_mode", "job_name")}
    limits = {
        k: getattr(rule, k)
        for k in ("waiting_longer_than", "running_longer_than", "expiring_within_days")
    }
    return {
        "workspace": rule.workspace,
        "name": rule.name,
        "events": list(rule.events),
        "filters": {k: v for k, v in filters.items() if v is not None},
        "limits": {k: v for k, v in limits.items() if v is not None},
        "target": target_of(rule),
        "secret_env": rule.target.secret_env,
        "enabled": rule.enabled,
    }


def rule_rows(store: EventStore, workspace: str | None = None) -> list[dict[str, Any]]:
    """The rules as applied last, optionally of one workspace (secret-free)."""
    return [
        _rule_row(rule)
        for (ws, _), rule in rule_book(store).current().items()
        if workspace is None or ws == workspace
    ]


def delivery_rows(
    store: EventStore,
    *,
    failed: bool = False,
    status: str | None = None,
    workspaces: frozenset[str] | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The latest notifications, newest first (``workspaces``: a caller's scope)."""
    with store.reading() as conn:
        return deliveries(
            conn, status="failed" if failed else status, workspaces=workspaces, limit=limit
        )


def retry(store: EventStore, notification_id: str) -> str:
    """Queue a notification again (a failed one, typically); its status before."""
    with store.transaction() as uow:
        before = requeue(uow.connection, notification_id)
    if before is None:
        raise NotFound(f"no notification {notification_id!r} (see: notifications deliveries)")
    return before


def set_rule(
    store: EventStore,
    workspace: str,
    name: str,
    body: dict[str, Any],
    *,
    principal: str,
    at: datetime | None = None,
    admin: bool = False,
    dry_run: bool = False,
) -> RulesApplied:
    """Create or replace one rule (the API's PUT): ``body`` is a rule as in a file, without
    ``name`` and ``workspace``, which the path gives. Setting the same rule again stores
    nothing."""
    if "name" in body or "workspace" in body:
        raise RuleFileError("name and workspace come from the path, not the body")
    workspaces, quotas = _known(store)
    desired = rules_from_document(
        {"rules": [{**body, "name": name, "workspace": workspace}]},
        workspaces=workspaces,
        quotas=quotas,
        admin=admin,
    )
    current = rule_book(store).current()
    key = (workspace, name)
    events = [] if current.get(key) == desired[key] else [NotificationRuleSet(rule=desired[key])]
    return _append_changes(store, events, principal, at, dry_run=dry_run)


def remove_rule(
    store: EventStore,
    workspace: str,
    name: str,
    *,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
) -> RulesApplied:
    """Delete one rule (the API's DELETE); an unknown one is not found."""
    if (workspace, name) not in rule_book(store).current():
        raise NotFound(f"no rule {name!r} in workspace {workspace!r}")
    return _append_changes(
        store,
        [NotificationRuleRemoved(workspace=workspace, name=name)],
        principal,
        at,
        dry_run=dry_run,
    )


def _append_changes(
    store: EventStore,
    events: Sequence[NotificationRuleSet | NotificationRuleRemoved],
    principal: str,
    at: datetime | None,
    *,
    dry_run: bool = False,
) -> RulesApplied:
    changes = []
    for event in events:
        if isinstance(event, NotificationRuleSet):
            stream = rule_stream(event.rule.workspace, event.rule.name)
        else:
            stream = rule_stream(event.workspace, event.name)
        changes.append(ApplyChange(event, stream, content_digest(event)))
    envelopes, expected = apply_envelopes(
        changes, store.stream_version, at=at or datetime.now(UTC), source=principal
    )
    if envelopes and not dry_run:
        store.append(envelopes, expected_versions=expected)
        catch_up_all(store)
    return RulesApplied([_describe(e) for e in events], envelopes)
