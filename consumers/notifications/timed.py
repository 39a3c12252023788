"""The time-based facts at a cluster instant: a job waiting or running longer than a rule's
limit, a subscription that will end within a rule's days and not renew.

Each is one fact per episode (its cause names the job and the instant its status began,
or the subscription and its end), stamped with the instant the limit was crossed, so a
scheduler that looks every minute and a replay that looks once queue the same
notifications.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text

from ledger.events import NotificationRule
from ledger.notifications import Fact
from ledger.store.base import UnitOfWork
from projections.subscriptions import load_subscriptions

__all__ = ["timed_facts"]

_WAITING = ("Creating", "Queuing", "Admitted", "Preempted")


def _jobs(uow: UnitOfWork, rule: NotificationRule, now: datetime, running: bool) -> list[Fact]:
    limit = rule.running_longer_than if running else rule.waiting_longer_than
    if limit is None:
        return []
    since = "running_since" if running else "status_since"
    statuses = ("Running",) if running else _WAITING
    # ``since`` is one of two column names chosen above, never input
    query = (
        f'SELECT job_uid, name, workspace, quota, billing_mode, "user", {since} '
        f"FROM job_state WHERE status = ANY(:statuses) AND {since} IS NOT NULL "
        f"AND {since} <= :cut AND (CAST(:ws AS text) IS NULL OR workspace = :ws)"
    )
    rows = uow.connection.execute(
        text(query),
        {
            "statuses": list(statuses),
            "cut": now - timedelta(seconds=limit),
            "ws": None if rule.workspace == "*" else rule.workspace,
        },
    ).all()
    event = "JobRunningTooLong" if running else "JobWaitingTooLong"
    return [
        Fact(
            event=event,
            occurred_at=began + timedelta(seconds=limit),
            cause=f"{uid}/{event}/{began.isoformat()}",
            workspace=ws,
            quota=quota,
            billing_mode=mode,
            job_uid=uid,
            job_name=name,
            user=user,
            data={"since": began.isoformat(), "limit_seconds": limit},
        )
        for uid, name, ws, quota, mode, user, began in rows
    ]


def timed_facts(
    uow: UnitOfWork, rules: list[NotificationRule], now: datetime
) -> list[tuple[NotificationRule, Fact]]:
    """Each rule's time-based facts at ``now`` (the rule's limits are its own)."""
    out: list[tuple[NotificationRule, Fact]] = []
    subs = None
    for rule in rules:
        if "JobWaitingTooLong" in rule.events:
            out.extend((rule, f) for f in _jobs(uow, rule, now, running=False))
        if "JobRunningTooLong" in rule.events:
            out.extend((rule, f) for f in _jobs(uow, rule, now, running=True))
        if "SubscriptionExpiring" in rule.events and rule.expiring_within_days:
            subs = subs if subs is not None else load_subscriptions(uow)
            window = timedelta(days=rule.expiring_within_days)
            for sub in subs.values():
                end = sub.ends_at
                if sub.renews() or not (end - window <= now < end):
                    continue
                out.append(
                    (
                        rule,
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
                        ),
                    )
                )
    return out
