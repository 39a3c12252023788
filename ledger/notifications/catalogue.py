"""The events a rule may name: the platform's job catalogue, time limits, money, capacity.

Each name is what a rule lists under ``events:`` and what a webhook's ``type`` says (in
dotted lower case: ``job.failed``). Most come straight from a stored event of the same
name; the time-based ones (``JobWaitingTooLong``, ``JobRunningTooLong``,
``SubscriptionExpiring``) are found by the scheduler on cluster time; the dispatcher's
decisions give ``PreemptionDecided`` and ``QuotaOverAdmission`` (a job admitted by
borrowing beyond its quota's guarantee); ``InvoiceOverdue`` is the billing tick's (an
invoice still open its due days after its issue); ``RuleDisabled`` is the sender's own (a webhook
answered ``410 Gone``): an admin's ``'*'`` rule on it hears of every endpoint gone.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["JOB_FACTS", "RULE_EVENTS", "TIMED", "webhook_type"]

#: rule event name -> what it means (docs/notifications.md lists the same)
RULE_EVENTS: Mapping[str, str] = {
    "JobQueued": "a job entered its queue",
    "JobStarted": "a job started running",
    "JobSucceeded": "a job succeeded",
    "JobFailed": "a job failed",
    "JobStopped": "a job was stopped",
    "JobPreempted": "a job was preempted",
    "JobRestarted": "a job was restarted (automatic fault tolerance)",
    "JobWaitingTooLong": "a job has waited in its queue longer than waiting_longer_than",
    "JobRunningTooLong": "a job has run longer than running_longer_than",
    "PreemptionDecided": "the dispatcher decided to preempt jobs for another",
    "QuotaOverAdmission": "a job was admitted by borrowing beyond its quota's guarantee",
    "BudgetExceeded": "a workspace's spend crossed its budget",
    "SubscriptionExpiring": "a subscription ends within expiring_within_days and will not renew",
    "SubscriptionExpired": "a subscription ended: its capacity is released after 24 hours",
    "InvoiceOverdue": "an invoice is still open DLC_INVOICE_DUE_DAYS after its issue",
    "RuleDisabled": "a rule's webhook answered 410 Gone, and the sender disabled the rule",
}

#: job lifecycle events a rule matches on the stored event of the same name
JOB_FACTS = frozenset(
    {
        "JobQueued",
        "JobStarted",
        "JobSucceeded",
        "JobFailed",
        "JobStopped",
        "JobPreempted",
        "JobRestarted",
    }
)

#: the time-based events and the rule field that sets their limit
TIMED: Mapping[str, str] = {
    "JobWaitingTooLong": "waiting_longer_than",
    "JobRunningTooLong": "running_longer_than",
    "SubscriptionExpiring": "expiring_within_days",
}


def webhook_type(event: str) -> str:
    """``JobFailed`` -> ``job.failed``; ``JobWaitingTooLong`` -> ``job.waiting_too_long``."""
    words: list[str] = []
    for ch in event:
        if ch.isupper() and words:
            words.append("_")
        words.append(ch.lower())
    head, _, rest = "".join(words).partition("_")
    return f"{head}.{rest}" if rest else head
