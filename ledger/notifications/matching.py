"""Which rules a fact matches, and the notification each match queues.

A **fact** is one thing a rule may name (:mod:`.catalogue`) with what filters read: the
workspace, quota, billing mode, job name and user of the job it is about. A rule matches
when it is enabled, lists the fact's event, is the fact's workspace's (or ``*``), and each
filter it sets agrees (``job_name`` is a glob). Rules are in force from their event's
``occurred_at``, so a fact is matched against the rules in force when it happened, and a
rule applied after a replay with ``--effective-at`` at its start still sees its facts.

The queued notification's id derives from the rule, the fact's cause event and the event
name: matching a fact twice queues it once (the store collapses duplicates). Its order key
is the rule and the job: a job's notifications reach one rule's target in order, and a
rule whose endpoint fails delays no other rule's.
"""

from __future__ import annotations

import bisect
import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ledger.events import (
    NotificationQueued,
    NotificationRule,
    NotificationRuleDisabled,
    NotificationRuleRemoved,
    NotificationRuleSet,
)
from ledger.ids import deterministic_id
from ledger.notifications.catalogue import webhook_type
from ledger.notifications.rules import ALL_WORKSPACES

__all__ = ["Fact", "RuleBook", "RuleChange", "matches", "notification_for", "target_of"]

RuleChange = NotificationRuleSet | NotificationRuleRemoved | NotificationRuleDisabled


@dataclass(frozen=True)
class Fact:
    event: str  # a rule event name (catalogue.RULE_EVENTS)
    occurred_at: datetime
    cause: str  # the id of the event (or the episode) it comes from
    workspace: str | None
    quota: str | None = None
    billing_mode: str | None = None
    job_uid: str | None = None
    job_name: str | None = None
    user: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


def matches(rule: NotificationRule, fact: Fact) -> bool:
    if not rule.enabled or fact.event not in rule.events:
        return False
    if rule.workspace != ALL_WORKSPACES and rule.workspace != fact.workspace:
        return False
    if rule.user is not None and rule.user != fact.user:
        return False
    if rule.quota is not None and rule.quota != fact.quota:
        return False
    if rule.billing_mode is not None and rule.billing_mode != fact.billing_mode:
        return False
    return rule.job_name is None or (
        fact.job_name is not None and fnmatch.fnmatchcase(fact.job_name, rule.job_name)
    )


class RuleBook:
    """Every rule's history, from its events: which rules are in force at an instant.

    Set and removed rules are in force from their events' effective instants; a rule the
    sender disabled (``410 Gone``) is off from then on, at every instant, until a later
    change sets it again (store order: the sender's clock is the wall's, the rules'
    instants are the cluster's, so the two are never compared)."""

    def __init__(self, events: Iterable[tuple[datetime, RuleChange]]) -> None:
        history: dict[tuple[str, str], list[tuple[datetime, NotificationRule | None]]] = {}
        off: dict[tuple[str, str], str] = {}
        for at, event in events:  # store order: equal instants keep it (sort is stable)
            if isinstance(event, NotificationRuleSet):
                key = (event.rule.workspace, event.rule.name)
                history.setdefault(key, []).append((at, event.rule))
                off.pop(key, None)
            elif isinstance(event, NotificationRuleRemoved):
                key = (event.workspace, event.name)
                history.setdefault(key, []).append((at, None))
                off.pop(key, None)
            elif (event.workspace, event.name) in history:
                off[(event.workspace, event.name)] = event.reason
        for changes in history.values():
            changes.sort(key=lambda c: c[0])
        self._history = history
        self._off = off

    def _as_in_force(self, key: tuple[str, str], rule: NotificationRule) -> NotificationRule:
        return rule.model_copy(update={"enabled": False}) if key in self._off else rule

    def rules_at(self, at: datetime) -> list[NotificationRule]:
        out: list[NotificationRule] = []
        for key, changes in self._history.items():
            i = bisect.bisect_right([c[0] for c in changes], at) - 1
            rule = changes[i][1] if i >= 0 else None
            if rule is not None:
                out.append(self._as_in_force(key, rule))
        return sorted(out, key=lambda r: (r.workspace, r.name))

    def current(self) -> dict[tuple[str, str], NotificationRule]:
        """The rules as applied last (whatever their effective times)."""
        out: dict[tuple[str, str], NotificationRule] = {}
        for key, changes in sorted(self._history.items()):
            rule = changes[-1][1]
            if rule is not None:
                out[key] = self._as_in_force(key, rule)
        return out

    def latest_change(self, key: tuple[str, str]) -> datetime | None:
        """The effective instant of the rule's latest change (None: never set)."""
        changes = self._history.get(key)
        return changes[-1][0] if changes else None

    def disabled(self, key: tuple[str, str]) -> str | None:
        """Why the sender disabled the rule (None: it did not)."""
        return self._off.get(key)


def target_of(rule: NotificationRule) -> str:
    """Where it goes, secret-free: ``webhook:<url>`` or ``apprise:<env var>``."""
    if rule.target.webhook:
        return f"webhook:{rule.target.webhook}"
    return f"apprise:{rule.target.apprise_env}"


def notification_for(rule: NotificationRule, fact: Fact) -> NotificationQueued:
    """The notification ``rule`` queues for ``fact`` (its payload is the webhook body's
    ``data``; docs/notifications.md has the schema)."""
    key = f"{rule.workspace}/{rule.name}"
    about = fact.job_name or fact.job_uid or fact.workspace or "-"
    data: dict[str, Any] = {
        "event": fact.event,
        "occurred_at": fact.occurred_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "workspace": fact.workspace,
        "rule": key,
    }
    for name in ("quota", "billing_mode", "job_uid", "job_name", "user"):
        value = getattr(fact, name)
        if value is not None:
            data[name] = value
    data.update(fact.data)
    return NotificationQueued(
        notification_id=str(deterministic_id("notification", key, fact.cause, fact.event)),
        target=target_of(rule),
        subject=f"{fact.event}: {about} ({fact.workspace or 'platform'})",
        body={},
        rule=key,
        event_type=webhook_type(fact.event),
        # in order per rule and job: one rule's failing endpoint never holds another's back
        order_key=f"{key}|{fact.job_uid}" if fact.job_uid else f"{key}:{fact.event}",
        cause_event_id=fact.cause,
        occurred_at=fact.occurred_at,
        payload=data,
    )
