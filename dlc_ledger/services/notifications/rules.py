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

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dlc_ledger.services.quotas import current_tree
from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.applies import ApplyChange, apply_envelopes, content_digest
from ledger.envelopes import Envelope
from ledger.errors import Conflict, NotFound
from ledger.events import NotificationRule, NotificationRuleRemoved, NotificationRuleSet
from ledger.notifications import (
    ALLOW_ENV,
    AllowList,
    RuleBook,
    RuleFileError,
    check_rule_name,
    diff_rules,
    rule_stream,
    rules_from_document,
    target_of,
)
from ledger.store.base import EventStore
from projections.jobs import known_workspaces
from projections.notifications import deliveries, requeue, rule_book, secret_grants
from projections.registry import catch_up_all

__all__ = [
    "RulesApplied",
    "allow_list_from_environment",
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


def _known(store: EventStore) -> tuple[frozenset[str], set[str]]:
    """The workspaces and quotas a rule may name."""
    with store.reading() as conn:
        workspaces = known_workspaces(conn)
    return workspaces, set(current_tree(store).specs)


def _checked(
    store: EventStore, document: Any, *, admin: bool, allow: AllowList | None
) -> dict[tuple[str, str], NotificationRule]:
    """The rules of ``document``, checked against what the ledger knows and grants."""
    workspaces, quotas = _known(store)
    return rules_from_document(
        document,
        workspaces=workspaces,
        quotas=quotas,
        grants=secret_grants(store),
        admin=admin,
        allow=allow if allow is not None else allow_list_from_environment(),
    )


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
    allow: AllowList | None = None,
) -> RulesApplied:
    """Make the rules of the file's workspaces match it; append only the differences.
    The file is a tenant's: at most 1 MB, no YAML anchors or aliases, every field checked
    (:func:`ledger.notifications.rules_from_document`)."""
    try:
        raw = load_yaml(text, tenant=True)
    except YamlError as exc:
        raise RuleFileError(str(exc)) from None
    desired = _checked(store, raw, admin=admin, allow=allow)
    book = rule_book(store)
    listed = {w for w, _ in desired} | {
        r.get("workspace")
        for r in (raw.get("rules") or [])
        if isinstance(r, dict) and isinstance(r.get("workspace"), str)
    }
    events = diff_rules(book.current(), desired, [str(w) for w in listed if w])
    return _append_changes(store, events, principal, at, dry_run=dry_run, book=book)


def allow_list_from_environment() -> AllowList:
    """The operator's allow-list as the sender reads it (``DLC_WEBHOOK_ALLOW``), for a
    caller that passes none (the CLI and the API pass their settings')."""
    return AllowList.parse(os.environ.get(ALLOW_ENV))


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
    """The rules as applied last, optionally of one workspace (secret-free); a rule the
    sender disabled says why in ``disabled_reason``."""
    book = rule_book(store)
    return [
        {**_rule_row(rule), "disabled_reason": book.disabled(key)}
        for key, rule in book.current().items()
        if workspace is None or key[0] == workspace
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
    """Queue a notification again (a failed one, typically); its status before. A delivered
    one is refused: it was delivered, and its delivery is a stored fact."""
    with store.transaction() as uow:
        before = requeue(uow.connection, notification_id)
    if before is None:
        raise NotFound(f"no notification {notification_id!r} (see: notifications deliveries)")
    if before == "delivered":
        raise Conflict(
            f"notification {notification_id} was delivered; only a failed or queued one is "
            "queued again (see: notifications deliveries)"
        )
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
    allow: AllowList | None = None,
) -> RulesApplied:
    """Create or replace one rule (the API's PUT): ``body`` is a rule as in a file, without
    ``name`` and ``workspace``, which the path gives. Setting the same rule again stores
    nothing."""
    if "name" in body or "workspace" in body:
        raise RuleFileError("name and workspace come from the path, not the body")
    check_rule_name(name)
    document = {"rules": [{**body, "name": name, "workspace": workspace}]}
    desired = _checked(store, document, admin=admin, allow=allow)
    book = rule_book(store)
    key = (workspace, name)
    rule = desired[key]
    events = [] if book.current().get(key) == rule else [NotificationRuleSet(rule=rule)]
    return _append_changes(store, events, principal, at, dry_run=dry_run, book=book)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
    book = rule_book(store)
    if (workspace, name) not in book.current():
        raise NotFound(f"no rule {name!r} in workspace {workspace!r}")
    return _append_changes(
        store,
        [NotificationRuleRemoved(workspace=workspace, name=name)],
        principal,
        at,
        dry_run=dry_run,
        book=book,
    )


def _append_changes(
    store: EventStore,
    events: Sequence[NotificationRuleSet | NotificationRuleRemoved],
    principal: str,
    at: datetime | None,
    *,
    dry_run: bool = False,
    book: RuleBook | None = None,
) -> RulesApplied:
    """Append the changes, effective at ``at``. A change effective before the rule's
    latest is refused: it would be stored and never shown (the later version stays in
    force), so "applied" would be a lie."""
    when = at or datetime.now(UTC)
    book = book if book is not None else rule_book(store)
    changes = []
    for event in events:
        if isinstance(event, NotificationRuleSet):
            key = (event.rule.workspace, event.rule.name)
        else:
            key = (event.workspace, event.name)
        latest = book.latest_change(key)
        if latest is not None and when < latest:
            raise Conflict(
                f"rule {key[1]!r} of {key[0]}: its current version is in force from "
                f"{_iso(latest)}, after this change's effective time {_iso(when)}; "
                f"apply it effective at or after {_iso(latest)} (--effective-at, ?effective_at=)"
            )
        changes.append(ApplyChange(event, rule_stream(*key), content_digest(event)))
    envelopes, expected = apply_envelopes(changes, store.stream_version, at=when, source=principal)
    if envelopes and not dry_run:
        store.append(envelopes, expected_versions=expected)
        catch_up_all(store)
    return RulesApplied([_describe(e) for e in events], envelopes)
