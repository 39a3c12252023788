"""The sender: the outbox's due notifications, delivered at least once, in order per job.

Notifications are sent in batches, each in a transaction that holds their outbox rows
(``FOR UPDATE SKIP LOCKED``: two senders never send one at once) and, on the answers, appends
``NotificationDelivered`` (attempts, latency from its queueing) or — after the policy's
attempts or age — ``NotificationFailed``, with the row moved to match; a failure below
that schedules the next attempt (:class:`ledger.notifications.RetryPolicy`, honouring
``Retry-After``). A sender killed mid-send commits nothing: the row is still queued and
the notification goes again with the same ``webhook-id``. A notification waits while an
earlier one of the same rule and job (``order_key``) is undelivered, so a job's
notifications reach each target in order, and one rule's failing endpoint holds back no
other rule's.

What an answer means follows Standard Webhooks (:func:`ledger.notifications.outcome_of`):
``410 Gone`` fails the notification and disables its rule (``NotificationRuleDisabled``,
a ``RuleDisabled`` fact for the admins' rules), another 4xx but 408 and 429 fails at once,
the rest is retried. A notification whose rule was removed or disabled, or whose secret is
no longer granted to its workspace, fails without a request; an error of the sender's own
on one notification fails that one (logged) and the round goes on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from consumers.notifications.transports import Attempt, Message, deliver
from ledger.envelopes import Envelope, make_envelope
from ledger.events import NotificationDelivered, NotificationFailed, NotificationRuleDisabled
from ledger.ids import deterministic_id
from ledger.notifications import (
    ALLOW_ENV,
    AllowList,
    Outcome,
    RetryPolicy,
    outcome_of,
    retry_after,
    rule_stream,
)
from ledger.store.base import EventStore, UnitOfWork
from projections.notifications import rule_book, secret_grants

log = logging.getLogger(__name__)

__all__ = ["SENDER_SOURCE", "SEND_BATCH", "SUMMARY_OVER", "SendResult", "send_due"]

SENDER_SOURCE = "notifications/sender"
#: notifications sent per transaction: one commit for many sends (a crash sends the
#: uncommitted ones of the batch again, with their ids: at least once)
SEND_BATCH = 200
#: sends in flight at once within a batch
SEND_CONCURRENCY = 8
#: more notifications than this due at once for one target become one summary message
SUMMARY_OVER = 20

Deliver = Callable[[Message, datetime], Attempt]

_DUE = (
    "SELECT o.notification_id, o.target, o.event_type, o.subject, o.payload, o.attempts, "
    "o.queued_at, o.rule FROM notification_outbox o "
    "WHERE o.status = 'queued' AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= :now) "
    "AND o.notification_id <> ALL(CAST(:tried AS text[])) "
    "AND NOT EXISTS (SELECT 1 FROM notification_outbox e WHERE e.order_key = o.order_key "
    "AND e.status = 'queued' AND e.position < o.position) "
    "ORDER BY o.position LIMIT :n FOR UPDATE OF o SKIP LOCKED"
)


@dataclass
class SendResult:
    delivered: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def attempted(self) -> int:
        return len(self.delivered) + len(self.retried) + len(self.failed)


@dataclass
class _Rule:
    """What the sender needs of a rule: its secret's variable, and why nothing of it may
    be sent now (removed, disabled, its variable no longer granted; None: it may)."""

    secret_env: str | None
    refusal: str | None


def _rules(uow: UnitOfWork) -> dict[str, _Rule]:
    """Every rule as applied, by ``<workspace>/<name>``, with the grants checked again:
    a grant revoked after the rule was applied stops its deliveries."""
    book = rule_book(uow)
    grants = secret_grants(uow)
    out: dict[str, _Rule] = {}
    for key, rule in book.current().items():
        refusal = None
        variable = rule.target.secret_env or rule.target.apprise_env
        if not rule.enabled:
            why = book.disabled(key)
            refusal = f"the rule is disabled ({why})" if why else "the rule is disabled"
        elif variable is not None and variable not in grants.get(key[0], ()):
            refusal = f"{variable} is not granted to workspace {key[0]}"
        out[f"{key[0]}/{key[1]}"] = _Rule(rule.target.secret_env, refusal)
    return out


def _guarded(send: Deliver) -> Deliver:
    """``send``, but an error of its own (a bug, a payload it cannot encode) fails that
    one notification, logged, instead of stopping the sender."""

    def attempt(message: Message, now: datetime) -> Attempt:
        try:
            return send(message, now)
        except Exception:
            log.exception("notification %s could not be sent", message.notification_id)
            return Attempt(False, "the sender could not send it (see the sender's log)", final=True)

    return attempt


def _send_grouped(
    rows: Sequence[Any],
    rules: Mapping[str, _Rule],
    send: Deliver,
    now: datetime,
) -> dict[str, Attempt]:
    """Each row's attempt. A rule's target with more than :data:`SUMMARY_OVER`
    notifications due at once (a preemption storm) gets one summary message listing them
    all, not a flood; its outcome is each one's. A row whose rule refuses sending fails
    without a request."""
    groups: dict[tuple[str, str, str | None], list[Any]] = {}
    outcomes: dict[str, Attempt] = {}
    for row in rows:
        rule = rules.get(row.rule)
        if rule is None or rule.refusal is not None:
            why = rule.refusal or "" if rule is not None else "the rule was removed"
            outcomes[row.notification_id] = Attempt(False, why, final=True)
            continue
        groups.setdefault((row.rule, row.target, rule.secret_env), []).append(row)
    single: list[Message] = []
    for (_rule, target, secret_env), group in groups.items():
        if len(group) > SUMMARY_OVER:
            ids = sorted(r.notification_id for r in group)
            kinds = {str(r.event_type) for r in group}
            summary = Message(
                notification_id=str(deterministic_id("notification-summary", *ids)),
                target=target,
                secret_env=secret_env,
                event_type="notifications.summary",
                subject=f"{len(group)} notifications ({', '.join(sorted(kinds))})",
                payload={
                    "count": len(group),
                    "notifications": [
                        {
                            "id": r.notification_id,
                            "type": r.event_type,
                            "subject": r.subject,
                            "data": r.payload,
                        }
                        for r in group
                    ],
                },
            )
            attempt = send(summary, now)
            outcomes.update((r.notification_id, attempt) for r in group)
            continue
        for r in group:
            single.append(
                Message(r.notification_id, r.target, secret_env, r.event_type, r.subject, r.payload)
            )
    if len(single) > 1:
        # the heads of distinct jobs' queues: sent side by side, order per job still holds
        with ThreadPoolExecutor(max_workers=SEND_CONCURRENCY) as pool:
            attempts = list(pool.map(lambda m: send(m, now), single))
    else:
        attempts = [send(m, now) for m in single]
    outcomes.update((m.notification_id, a) for m, a in zip(single, attempts, strict=True))
    return outcomes


def _disabled(rule: str, nid: str, now: datetime) -> Envelope:
    workspace, _, name = rule.partition("/")
    reason = f"its webhook answered 410 Gone at {now.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    log.warning("notification rule %s disabled: %s", rule, reason)
    return make_envelope(
        NotificationRuleDisabled(workspace=workspace, name=name, reason=reason),
        event_id=deterministic_id("event", "NotificationRuleDisabled", rule, nid),
        stream=rule_stream(workspace, name),
        occurred_at=now,
        observed_at=now,
        source=SENDER_SOURCE,
    )


def _verdict(
    attempt: Attempt, attempts: int, queued_at: datetime, now: datetime, policy: RetryPolicy
) -> Outcome:
    if attempt.ok:
        return "delivered"
    if attempt.final:
        return "fail"
    verdict = outcome_of(attempt.status)
    if verdict == "retry" and policy.gives_up(attempts, queued_at, now):
        return "fail"
    return verdict


def _batch(
    store: EventStore,
    now: datetime,
    policy: RetryPolicy,
    send: Deliver,
    result: SendResult,
    size: int,
) -> bool:
    """Up to ``size`` due notifications (the head of each job's queue) sent, and their
    outcomes committed together: one commit for many sends, and still at least once (a
    crash before the commit sends them all again, with the same ids)."""
    with store.transaction() as uow:
        # one attempt per notification per call: a retry due at once waits for the next
        tried = [*result.delivered, *result.retried, *result.failed]
        rows = uow.connection.execute(text(_DUE), {"now": now, "tried": tried, "n": size}).all()
        if not rows:
            return False
        events: list[Envelope] = []
        updates: list[dict[str, Any]] = []
        rules = _rules(uow)  # read again each batch: a rule disabled by the last one is off
        outcomes = _send_grouped(rows, rules, send, now)
        for nid, _target, _type, _subject, _payload, attempts, queued_at, rule in rows:
            attempt = outcomes[nid]
            attempts += 1
            verdict = _verdict(attempt, attempts, queued_at, now, policy)
            if verdict == "gone" and rules[rule].refusal is None:
                events.append(_disabled(rule, nid, now))
                rules[rule].refusal = "the rule is disabled (its webhook answered 410 Gone)"
            if verdict == "retry":
                wait = policy.delay(nid, attempts, retry_after(attempt.retry_after, now))
                uow.connection.execute(
                    text(
                        "UPDATE notification_outbox SET attempts = :a, next_attempt_at = :n, "
                        "last_error = :e WHERE notification_id = :id"
                    ),
                    {"a": attempts, "n": now + wait, "e": attempt.error, "id": nid},
                )
                result.retried.append(nid)
                continue
            event: NotificationDelivered | NotificationFailed
            if verdict == "delivered":
                latency = max(int((now - queued_at).total_seconds() * 1000), 0)
                event = NotificationDelivered(
                    notification_id=nid, attempts=attempts, latency_ms=latency
                )
                status, bucket = "delivered", result.delivered
            else:
                event = NotificationFailed(
                    notification_id=nid, attempts=attempts, error=attempt.error
                )
                status, bucket = "failed", result.failed
            events.append(
                make_envelope(
                    event,
                    event_id=deterministic_id("event", event.type_name, nid),
                    stream=f"notification/{nid}",
                    occurred_at=now,
                    observed_at=now,
                    source=SENDER_SOURCE,
                )
            )
            updates.append(
                {
                    "s": status,
                    "a": attempts,
                    "f": now,
                    "e": attempt.error or None,
                    "l": getattr(event, "latency_ms", None),
                    "id": nid,
                }
            )
            bucket.append(nid)
        if events:
            uow.append(events)
            uow.connection.execute(
                text(
                    "UPDATE notification_outbox SET status = :s, attempts = :a, "
                    "finished_at = :f, last_error = :e, latency_ms = :l "
                    "WHERE notification_id = :id"
                ),
                updates,
            )
        return True


def send_due(
    store: EventStore,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    policy: RetryPolicy | None = None,
    send: Deliver | None = None,
    env: Mapping[str, str] | None = None,
    allow: AllowList | None = None,
    limit: int = 1000,
    batch: int = SEND_BATCH,
) -> SendResult:
    """Send every notification due now (up to ``limit``), in batches of one transaction
    each. ``env``: where secrets are read (default the process's); ``allow``: the
    operator's allow-list of webhook targets inside its network (default
    ``DLC_WEBHOOK_ALLOW`` in ``env``)."""
    policy = policy or RetryPolicy()
    environment = os.environ if env is None else env
    allowed = allow if allow is not None else AllowList.parse(environment.get(ALLOW_ENV))
    transport = _guarded(send or (lambda m, t: deliver(m, t, environment, allowed)))
    result = SendResult()
    while result.attempted < limit and _batch(
        store, now(), policy, transport, result, min(batch, limit - result.attempted)
    ):
        pass
    return result
