"""The matcher: stored facts against the rules in force, into queued notifications.

One step reads the store's events after its checkpoint (``notifications:matcher``), turns
them into facts (:mod:`.facts`), adds the time-based facts at the cluster instant ``now``
(:mod:`.timed`), matches each against the rules in force when it happened, appends one
``NotificationQueued`` per rule x fact (a deterministic id: matching again queues nothing)
and fills the outbox with every rule-bearing ``NotificationQueued`` (its own, and any
another writer appended), all in one transaction that also moves the checkpoint: a crash
loses nothing and repeats nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson
from sqlalchemy import text

from consumers.notifications.facts import FACT_TYPES, facts_of
from consumers.notifications.quarantine import MATCHER_SOURCE, quarantine
from consumers.notifications.timed import timed_facts
from ledger.catalogue import decode
from ledger.envelopes import Envelope, make_envelope
from ledger.events import NotificationQueued, NotificationRule
from ledger.ids import deterministic_id
from ledger.notifications import Fact, matches, notification_for
from ledger.store.base import RecordedEvent, UnitOfWork
from projections.notifications import rule_book

__all__ = ["MATCHER_CHECKPOINT", "MATCHER_SOURCE", "MatchResult", "match"]

MATCHER_CHECKPOINT = "notifications:matcher"
#: facts stamped by the sender's (wall) clock, not the cluster's
WALL_CLOCK_FACTS = frozenset({"RuleDisabled"})


@dataclass(frozen=True)
class MatchResult:
    facts: int
    queued: int  # notifications newly queued
    upto: int  # the position matched up to


def _queued(note: NotificationQueued, at: datetime) -> Envelope:
    return make_envelope(
        note,
        event_id=deterministic_id("event", "NotificationQueued", note.notification_id),
        stream=f"notification/{note.notification_id}",
        occurred_at=note.occurred_at or at,
        observed_at=at,
        source=MATCHER_SOURCE,
    )


def _outbox(uow: UnitOfWork, records: Sequence[RecordedEvent]) -> None:
    rows = []
    for record in records:
        note = decode(record.envelope)
        if not isinstance(note, NotificationQueued) or note.rule is None:
            continue
        rows.append(
            {
                "id": note.notification_id,
                "pos": record.position,
                "qa": record.recorded_at,
                "oa": note.occurred_at,
                "rule": note.rule,
                "ws": (note.payload or {}).get("workspace"),
                "et": note.event_type or "",
                "target": note.target,
                "ok": note.order_key or note.notification_id,
                "subject": note.subject,
                "payload": orjson.dumps(note.payload or {}).decode(),
            }
        )
    if rows:
        uow.connection.execute(
            text(
                "INSERT INTO notification_outbox (notification_id, position, queued_at, "
                "occurred_at, rule, workspace, event_type, target, order_key, subject, "
                "payload, status, attempts) VALUES (:id, :pos, :qa, :oa, :rule, :ws, :et, "
                ":target, :ok, :subject, CAST(:payload AS jsonb), 'queued', 0) "
                "ON CONFLICT (notification_id) DO NOTHING"
            ),
            rows,
        )


def _queue(
    uow: UnitOfWork, rule: NotificationRule, fact: Fact, notes: dict[str, NotificationQueued]
) -> None:
    """The notification ``rule`` queues for ``fact``, if it matches; one that cannot be
    built (a bug, or a fact too large for a notification) is quarantined."""
    try:
        if matches(rule, fact):
            note = notification_for(rule, fact)
            notes.setdefault(note.notification_id, note)
    except Exception as exc:
        quarantine(uow, f"rule {rule.workspace}/{rule.name} on a {fact.event} fact", rule, exc)


def match(uow: UnitOfWork, now: datetime) -> MatchResult:
    """One matching step inside ``uow`` (the caller commits): the events after the
    checkpoint, and the time-based facts at ``now`` (cluster time)."""
    after = uow.load_checkpoint(MATCHER_CHECKPOINT, for_update=True).position or 0
    head = uow.head_position()
    records = uow.read_window(after, head, sorted(FACT_TYPES))
    book = rule_book(uow, head)
    _outbox(uow, records)
    notes: dict[str, NotificationQueued] = {}
    facts = facts_of(uow, records)
    current = list(book.current().values())
    for fact in facts:
        # the sender's own facts are on the wall clock, the rules' instants on the cluster's:
        # they meet the rules as applied now
        rules = current if fact.event in WALL_CLOCK_FACTS else book.rules_at(fact.occurred_at)
        for rule in rules:
            _queue(uow, rule, fact, notes)
    timed = timed_facts(uow, book, now)
    for rule, fact in timed:
        _queue(uow, rule, fact, notes)
    queued = 0
    if notes:
        envelopes = [_queued(n, now) for n in notes.values()]
        result = uow.append(envelopes)
        queued = len(result.positions)
        if result.positions:
            fresh = set(result.positions)
            _outbox(uow, [r for r in uow.read_window(head, max(fresh)) if r.position in fresh])
    uow.save_checkpoint(MATCHER_CHECKPOINT, position=head)
    return MatchResult(len(facts) + len(timed), queued, head)
