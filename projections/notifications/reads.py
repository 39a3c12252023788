"""The event centre's reads: rules as applied, and deliveries from the outbox.

Rules are few and folded from their events on read (``NotificationRuleSet`` /
``NotificationRuleRemoved``); deliveries are the outbox's rows, newest first, a
caller's workspaces being a condition of the query.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ledger.catalogue import decode
from ledger.events import (
    NotificationRuleDisabled,
    NotificationRuleRemoved,
    NotificationRuleSet,
    NotificationSecretGranted,
    NotificationSecretRevoked,
)
from ledger.notifications import Grants, RuleBook, RuleChange, grants_of
from ledger.store.base import EventStore, UnitOfWork, read_all_of_types

__all__ = [
    "DELIVERY_STATUSES",
    "RULE_TYPES",
    "deliveries",
    "requeue",
    "rule_book",
    "secret_grants",
]

DELIVERY_STATUSES = ("queued", "delivered", "failed")
RULE_TYPES = ("NotificationRuleSet", "NotificationRuleRemoved", "NotificationRuleDisabled")
GRANT_TYPES = ("NotificationSecretGranted", "NotificationSecretRevoked")


def rule_book(source: EventStore | UnitOfWork, upto: int | None = None) -> RuleBook:
    """Every rule's history (in force from each change's ``occurred_at``), from its events
    up to position ``upto`` (default the head)."""
    changes: list[tuple[datetime, RuleChange]] = []
    for record in read_all_of_types(source, RULE_TYPES, upto=upto):
        data = decode(record.envelope)
        assert isinstance(
            data, NotificationRuleSet | NotificationRuleRemoved | NotificationRuleDisabled
        )
        changes.append((record.occurred_at, data))
    return RuleBook(changes)


def secret_grants(source: EventStore | UnitOfWork) -> Grants:
    """The environment variables each workspace's rules may name, as granted now."""
    events: list[NotificationSecretGranted | NotificationSecretRevoked] = []
    for record in read_all_of_types(source, GRANT_TYPES):
        data = decode(record.envelope)
        assert isinstance(data, NotificationSecretGranted | NotificationSecretRevoked)
        events.append(data)
    return grants_of(events)


def deliveries(
    conn: Connection,
    *,
    status: str | None = None,
    workspaces: Collection[str] | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The latest notifications (newest first), optionally of one status."""
    return [
        dict(r)
        for r in conn.execute(
            text(
                "SELECT notification_id, rule, workspace, event_type, target, subject, status, "
                "attempts, last_error, occurred_at, queued_at, next_attempt_at, finished_at, "
                "latency_ms FROM notification_outbox "
                "WHERE (CAST(:s AS text) IS NULL OR status = :s) "
                "AND (CAST(:scope AS text[]) IS NULL OR workspace = ANY(CAST(:scope AS text[]))) "
                "ORDER BY position DESC LIMIT :n"
            ),
            {"s": status, "n": limit, "scope": None if workspaces is None else sorted(workspaces)},
        ).mappings()
    ]


def requeue(conn: Connection, notification_id: str) -> str | None:
    """Put a failed (or queued) notification back in the queue, due now; its status before
    (None: no such notification). A delivered one stays delivered: its status is returned
    and nothing changes (its ``NotificationDelivered`` is stored; sending it again could not
    be recorded)."""
    row = conn.execute(
        text("SELECT status FROM notification_outbox WHERE notification_id = :id FOR UPDATE"),
        {"id": notification_id},
    ).first()
    if row is None:
        return None
    if row[0] == "delivered":
        return "delivered"
    conn.execute(
        text(
            "UPDATE notification_outbox SET status = 'queued', attempts = 0, "
            "next_attempt_at = NULL, finished_at = NULL WHERE notification_id = :id"
        ),
        {"id": notification_id},
    )
    return str(row[0])
