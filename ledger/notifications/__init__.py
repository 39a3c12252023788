"""The event centre's rules (pure): what a rule may name, its file, which facts it matches,
the notification a match queues, and when a failed delivery is tried again."""

from ledger.notifications.catalogue import JOB_FACTS, RULE_EVENTS, TIMED, webhook_type
from ledger.notifications.matching import Fact, RuleBook, matches, notification_for, target_of
from ledger.notifications.retries import RetryPolicy, retry_after
from ledger.notifications.rules import (
    ALL_WORKSPACES,
    RuleFileError,
    diff_rules,
    rule_key,
    rule_stream,
    rules_from_document,
)

__all__ = [
    "ALL_WORKSPACES",
    "JOB_FACTS",
    "RULE_EVENTS",
    "TIMED",
    "Fact",
    "RetryPolicy",
    "RuleBook",
    "RuleFileError",
    "diff_rules",
    "matches",
    "notification_for",
    "retry_after",
    "rule_key",
    "rule_stream",
    "rules_from_document",
    "target_of",
    "webhook_type",
]
