"""The time-based facts at a cluster instant: a job waiting or running longer than a rule's
limit, a subscription that will end within a rule's days and not renew.

Each is one fact per episode (its cause names the job, the event and the instant its status
began, or the subscription and its end), stamped with the instant the limit was crossed,
so a scheduler that looks every minute and a replay that looks once queue the same
notifications. A look finds:

- jobs still in an episode past its limit (``job_state``'s status, matched against the
  rules in force now);
- episodes that crossed their limit and then ended, in the jobs the jobs read model changed
  since the last look (:func:`ledger.notifications.episodes.crossings` over their
  ``transitions``, matched against the rules in force at the crossing); after a rule change
  every job is read again, so a rule applied with an earlier ``--effective-at`` sees the
  waits of its time.

The last look is a checkpoint (``notifications:timed``: the jobs projection's position and
the latest rule change), saved in the matcher's transaction. A rule that cannot be looked
at (one stored before its limits were bounded) is quarantined and the rest go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from consumers.notifications.quarantine import quarantine
from ledger.events import NotificationRule
from ledger.notifications import MAX_EXPIRING_DAYS, MAX_LIMIT_SECONDS, Fact, RuleBook
from ledger.notifications.episodes import RUNNING, WAITING, crossings
from ledger.store.base import UnitOfWork
from projections.jobs import parse_time
from projections.notifications import RULE_TYPES
from projections.steps import CHECKPOINT_PREFIX
from projections.subscriptions import load_subscriptions

__all__ = ["TIMED_CHECKPOINT", "timed_facts"]

TIMED_CHECKPOINT = "notifications:timed"
_JOBS_CHECKPOINT = f"{CHECKPOINT_PREFIX}jobs"
_JOB_EVENTS = {"JobWaitingTooLong": False, "JobRunningTooLong": True}
_COLUMNS = 'job_uid, name, workspace, quota, billing_mode, "user"'


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def _fact(row: Any, event: str, began: datetime, limit: int) -> Fact:
    uid, name, ws, quota, mode, user = row[:6]
    return Fact(
        event=event,
        occurred_at=began + timedelta(seconds=limit),
        cause=f"{uid}/{event}/{_iso(began)}",
        workspace=ws,
        quota=quota,
        billing_mode=mode,
        job_uid=uid,
        job_name=name,
        user=user,
        data={"since": _iso(began), "limit_seconds": limit},
    )


def _limit(rule: NotificationRule, running: bool) -> int | None:
    limit = rule.running_longer_than if running else rule.waiting_longer_than
    if limit is not None and limit > MAX_LIMIT_SECONDS:
        raise ValueError(f"limit {limit} s is beyond the {MAX_LIMIT_SECONDS} s a rule may set")
    return limit


def _open(uow: UnitOfWork, rule: NotificationRule, now: datetime, running: bool) -> list[Fact]:
    """Jobs of ``rule``'s workspace still in an episode past its limit."""
    limit = _limit(rule, running)
    if limit is None:
        return []
    since = "running_since" if running else "status_since"
    # ``since`` is one of two column names chosen above, never input
    rows = uow.connection.execute(
        text(
            f"SELECT {_COLUMNS}, {since} FROM job_state WHERE status = ANY(:statuses) "
            f"AND {since} IS NOT NULL AND {since} <= :cut "
            "AND (CAST(:ws AS text) IS NULL OR workspace = :ws)"
        ),
        {
            "statuses": sorted(RUNNING if running else WAITING),
            "cut": now - timedelta(seconds=limit),
            "ws": None if rule.workspace == "*" else rule.workspace,
        },
    ).all()
    event = "JobRunningTooLong" if running else "JobWaitingTooLong"
    return [_fact(row, event, row[6], limit) for row in rows]


def _changed(uow: UnitOfWork, after: int | None) -> Sequence[Any]:
    """The jobs whose rows changed after position ``after`` (None: every job)."""
    return uow.connection.execute(
        text(
            f"SELECT {_COLUMNS}, transitions FROM job_state "
            "WHERE CAST(:after AS bigint) IS NULL OR last_position > :after"
        ),
        {"after": after},
    ).all()


def _ended(
    rows: Sequence[Any], book: RuleBook, timed: list[NotificationRule], now: datetime
) -> Iterable[tuple[NotificationRule, Fact]]:
    """Episodes of ``rows`` that crossed a rule's limit, each matched against the rules in
    force when it crossed."""
    for row in rows:
        transitions = [(status, parse_time(since)) for status, since in row[6]]
        for event, running in _JOB_EVENTS.items():
            for rule in timed:
                limit = _limit(rule, running) if event in rule.events else None
                if limit is None or rule.workspace not in ("*", row[2]):
                    continue
                statuses = RUNNING if running else WAITING
                for began, crossed in crossings(
                    transitions, statuses, timedelta(seconds=limit), now
                ):
                    then = _version_at(book, rule, crossed)
                    if then is not None and event in then.events and _limit(then, running) == limit:
                        yield then, _fact(row, event, began, limit)


def _version_at(book: RuleBook, rule: NotificationRule, at: datetime) -> NotificationRule | None:
    """``rule`` as it was in force at ``at`` (None: it was not, or was off)."""
    for then in book.rules_at(at):
        if (then.workspace, then.name) == (rule.workspace, rule.name):
            return then if then.enabled else None
    return None


def _expiring(rule: NotificationRule, now: datetime, subs: dict[str, Any]) -> list[Fact]:
    days = rule.expiring_within_days
    if days is None:
        return []
    if days > MAX_EXPIRING_DAYS:
        raise ValueError(f"expiring_within_days {days} is beyond {MAX_EXPIRING_DAYS}")
    window = timedelta(days=days)
    out = []
    for sub in subs.values():
        end = sub.ends_at
        if sub.renews() or not (end - window <= now < end):
            continue
        out.append(
            Fact(
                event="SubscriptionExpiring",
                occurred_at=end - window,
                cause=f"{sub.subscription_id}/expiring/{end.isoformat()}",
                workspace=sub.workspace,
                data={
                    "subscription_id": sub.subscription_id,
                    "group": sub.group,
                    "ends_at": end.isoformat(),
                    "nodes": sub.nodes,
                },
            )
        )
    return out


def _rules_position(uow: UnitOfWork) -> int:
    found = uow.connection.execute(
        text(
            "SELECT max(position) FROM events WHERE type = ANY(:types)",
        ),
        {"types": list(RULE_TYPES)},
    ).scalar()
    return int(found or 0)


def timed_facts(
    uow: UnitOfWork, book: RuleBook, now: datetime
) -> list[tuple[NotificationRule, Fact]]:
    """Each rule's time-based facts at ``now`` (the rule's limits are its own), and the
    checkpoint of this look saved."""
    rules = [r for r in book.rules_at(now) if r.enabled]
    out: list[tuple[NotificationRule, Fact]] = []
    subs: dict[str, Any] | None = None
    for rule in rules:
        try:
            for event, running in _JOB_EVENTS.items():
                if event in rule.events:
                    out.extend((rule, f) for f in _open(uow, rule, now, running))
            if "SubscriptionExpiring" in rule.events:
                subs = subs if subs is not None else load_subscriptions(uow)
                out.extend((rule, f) for f in _expiring(rule, now, subs))
        except SQLAlchemyError:
            raise
        except Exception as exc:
            quarantine(uow, f"rule {rule.workspace}/{rule.name}: its limits", rule, exc)
    out.extend(_looked_back(uow, book, now))
    return out


def _looked_back(
    uow: UnitOfWork, book: RuleBook, now: datetime
) -> list[tuple[NotificationRule, Fact]]:
    """Episodes that ended past their limit since the last look (see the module)."""
    last = uow.load_checkpoint(TIMED_CHECKPOINT, for_update=True)
    projected = uow.load_checkpoint(_JOBS_CHECKPOINT).position or 0
    rules_at = _rules_position(uow)
    timed = [r for r in book.current().values() if set(r.events) & set(_JOB_EVENTS) and r.enabled]
    out: list[tuple[NotificationRule, Fact]] = []
    if timed:
        full = int(last.offsets.get("rules", 0)) != rules_at
        rows = _changed(uow, None if full else (last.position or 0))
        try:
            out = list(_ended(rows, book, timed, now))
        except SQLAlchemyError:
            raise
        except Exception as exc:
            quarantine(uow, "time-based rules: episodes of changed jobs", {"now": now}, exc)
    uow.save_checkpoint(TIMED_CHECKPOINT, position=projected, offsets={"rules": rules_at})
    return out
