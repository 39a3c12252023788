"""The notifications context's use cases: its rules (:mod:`.rules`: a rules file, one rule
set or removed, the rules and deliveries as rows, a delivery retried) and the grants of the
secrets a rule's target may name (:mod:`.secrets`). The rules themselves are
:mod:`ledger.notifications`, the view :mod:`projections.notifications`, the sender
:mod:`consumers.notifications`."""

from dlc_ledger.services.notifications.rules import (
    apply_rules_file,
    delivery_rows,
    remove_rule,
    retry,
    rule_rows,
    set_rule,
)
from dlc_ledger.services.notifications.secrets import (
    GrantChanged,
    grant_rows,
    grant_secret,
    revoke_secret,
)

__all__ = [
    "GrantChanged",
    "apply_rules_file",
    "delivery_rows",
    "grant_rows",
    "grant_secret",
    "remove_rule",
    "retry",
    "revoke_secret",
    "rule_rows",
    "set_rule",
]
