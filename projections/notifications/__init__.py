"""The notifications context: the event centre's rules as applied and its deliveries."""

from projections.notifications.reads import (
    DELIVERY_STATUSES,
    RULE_TYPES,
    deliveries,
    requeue,
    rule_book,
    secret_grants,
)

__all__ = [
    "DELIVERY_STATUSES",
    "RULE_TYPES",
    "deliveries",
    "requeue",
    "rule_book",
    "secret_grants",
]
