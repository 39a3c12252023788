"""The event centre's rules (pure): what a rule may name, its file, which facts it matches,
the notification a match queues, and when a failed delivery is tried again."""

from ledger.notifications.catalogue import JOB_FACTS, RULE_EVENTS, TIMED, webhook_type
from ledger.notifications.grants import Grants, grant_stream, grants_of, is_variable_name
from ledger.notifications.matching import (
    Fact,
    RuleBook,
    RuleChange,
    matches,
    notification_for,
    target_of,
)
from ledger.notifications.retries import (
    MAX_RETRY_AFTER,
    Outcome,
    RetryPolicy,
    outcome_of,
    retry_after,
)
from ledger.notifications.rules import (
    ALL_WORKSPACES,
    MAX_EXPIRING_DAYS,
    MAX_LIMIT_SECONDS,
    MAX_RULES,
    RuleFileError,
    check_rule_name,
    diff_rules,
    rule_key,
    rule_stream,
    rules_from_document,
)
from ledger.notifications.targets import (
    ALLOW_ENV,
    AllowList,
    TargetRefused,
    check_webhook_url,
    refused_address,
)

__all__ = [
    "ALLOW_ENV",
    "ALL_WORKSPACES",
    "JOB_FACTS",
    "MAX_EXPIRING_DAYS",
    "MAX_LIMIT_SECONDS",
    "MAX_RETRY_AFTER",
    "MAX_RULES",
    "RULE_EVENTS",
    "TIMED",
    "AllowList",
    "Fact",
    "Grants",
    "Outcome",
    "RetryPolicy",
    "RuleBook",
    "RuleChange",
    "RuleFileError",
    "TargetRefused",
    "check_rule_name",
    "check_webhook_url",
    "diff_rules",
    "grant_stream",
    "grants_of",
    "is_variable_name",
    "matches",
    "notification_for",
    "outcome_of",
    "refused_address",
    "retry_after",
    "rule_key",
    "rule_stream",
    "rules_from_document",
    "target_of",
    "webhook_type",
]
