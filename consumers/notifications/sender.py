"""The sender: the outbox's due notifications, delivered at least once, in order per job.

Notifications are sent in batches, each in a transaction that holds their outbox rows
(``FOR UPDATE SKIP LOCKED``: two senders never send one at once) and, on the answers, appends
``NotificationDelivered`` (attempts, latency from its queueing) or — after the policy's
attempts or age — ``NotificationFailed``, with the row moved to match; a failure below
that schedules the next attempt (:class:`ledger.notifications.RetryPolicy`, honouring
``Retry-After``). A sender killed mid-send commits nothing: the row is still queued and
the notification goes again with the same ``webhook-id``. A notification waits while an
earlier one of the same job (``order_key``) is undelivered, so a job's notifications
arrive in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from consumers.notifications.transports import Attempt, Message, deliver
from ledger.envelopes import Envelope, make_envelope
from ledger.events import NotificationDelivered, NotificationFailed
from ledger.ids import deterministic_id
from ledger.notifications import RetryPolicy, retry_after
from ledger.store.base import EventStore, UnitOfWork

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


def _secret_env(uow: UnitOfWork, rule: str) -> str | None:
    row = uow.connection.execute(
        text(
            "SELECT data FROM events WHERE type = 'NotificationRuleSet' "
            "AND stream = :s ORDER BY position DESC LIMIT 1"
        ),
        {"s": f"notification-rule/{rule}"},
    ).first()
    if row is None:
        return None
    target = row[0]["rule"]["target"]
    return target.get("secret_env") if isinstance(target, dict) else None


def _send_grouped(
    rows: Sequence[Any],
    secrets: Mapping[str, str | None],
    send: Deliver,
    now: datetime,
) -> dict[str, Attempt]:
    """Each row's attempt. A target with more than :data:`SUMMARY_OVER` notifications due
    at once (a preemption storm) gets one summary message listing them all, not a flood;
    its outcome is each one's."""
    groups: dict[tuple[str, str | None], list[Any]] = {}
    for row in rows:
        groups.setdefault((row.target, secrets[row.rule]), []).append(row)
    outcomes: dict[str, Attempt] = {}
    single: list[Message] = []
    for (target, secret_env), group in groups.items():
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


def _batch(
    store: EventStore,
    now: datetime,
    policy: RetryPolicy,
    send: Deliver,
    result: SendResult,
    secrets: dict[str, str | None],
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
        for row in rows:
            if row.rule not in secrets:
                secrets[row.rule] = _secret_env(uow, row.rule)
        outcomes = _send_grouped(rows, secrets, send, now)
        for nid, _target, _type, _subject, _payload, attempts, queued_at, _rule in rows:
            attempt = outcomes[nid]
            attempts += 1
            if not attempt.ok and not policy.gives_up(attempts, queued_at, now):
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
            if attempt.ok:
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
    limit: int = 1000,
    batch: int = SEND_BATCH,
) -> SendResult:
    """Send every notification due now (up to ``limit``), one transaction each."""
    policy = policy or RetryPolicy()
    environment = os.environ if env is None else env
    transport: Deliver = send or (lambda m, t: deliver(m, t, environment))
    result = SendResult()
    secrets: dict[str, str | None] = {}  # rule -> its secret's variable, read once a call
    while result.attempted < limit and _batch(
        store, now(), policy, transport, result, secrets, min(batch, limit - result.attempted)
    ):
        pass
    return result
