"""Subscriptions: nodes of a spec bought into resource groups by the month or year.

The pure rules (no IO): term arithmetic (:mod:`.terms`), the price section of a book
(:mod:`.specs`), a subscription's state folded from its events (:mod:`.model`), the
refund rule (:mod:`.refunds`), the changes of a running subscription (:mod:`.changes`),
daily revenue recognition (:mod:`.recognition`), the transactions they post
(:mod:`.postings`), the capacity they give the quota tree (:mod:`.capacity`) and their
recognised revenue shown back to workspaces (:mod:`.showback`). docs/subscriptions.md
states each rule with an example.
"""

from ledger.subscriptions.capacity import (
    capacity_problems,
    capacity_shortfalls,
    drawing_groups,
    expired_quotas,
    group_capacity,
    node_resources,
    released_quotas,
)
from ledger.subscriptions.changes import add_nodes, schedule_nodes
from ledger.subscriptions.model import (
    RELEASE_GRACE,
    RENEWAL_LEAD,
    Status,
    Subscription,
    fold_subscriptions,
)
from ledger.subscriptions.postings import (
    addition_transaction,
    charge_transaction,
    deferred_account,
    recognition_transactions,
    refund_transaction,
    subscription_revenue_account,
)
from ledger.subscriptions.recognition import recognised_by, recognition_days
from ledger.subscriptions.refunds import (
    NO_REASON_WINDOW,
    Refund,
    TermRefund,
    refund_for,
    refund_of,
)
from ledger.subscriptions.specs import SpecSchedule, UnknownSpec, node_specs_from_document
from ledger.subscriptions.terms import add_terms, days_used, term_end

__all__ = [
    "NO_REASON_WINDOW",
    "RELEASE_GRACE",
    "RENEWAL_LEAD",
    "Refund",
    "SpecSchedule",
    "Status",
    "Subscription",
    "TermRefund",
    "UnknownSpec",
    "add_nodes",
    "add_terms",
    "addition_transaction",
    "capacity_problems",
    "capacity_shortfalls",
    "charge_transaction",
    "days_used",
    "deferred_account",
    "drawing_groups",
    "expired_quotas",
    "fold_subscriptions",
    "group_capacity",
    "node_resources",
    "node_specs_from_document",
    "recognised_by",
    "recognition_days",
    "recognition_transactions",
    "refund_for",
    "refund_of",
    "refund_transaction",
    "released_quotas",
    "schedule_nodes",
    "subscription_revenue_account",
    "term_end",
]
