"""The subscriptions context's use cases, in one place: orders (purchase, renew, cancel:
:mod:`.orders`), their changes (add nodes, nodes at renewal, change spec:
:mod:`.changes`), the resource groups they fill (:mod:`.groups`), the utilisation report
(:mod:`.reports`), prepaid cost shown back to workspaces (:mod:`.showback`) and a replay's
subscription plan (:mod:`.plans`). The renewal itself is decided in
:mod:`processes.subscriptions` (for the scheduler and by hand alike), the rules in
:mod:`ledger.subscriptions`, the view in :mod:`projections.subscriptions`."""

from dlc_ledger.services.subscriptions.changes import (
    NodesAdded,
    NodesScheduled,
    SpecChange,
    add_subscription_nodes,
    change_rows,
    change_spec,
    schedule_subscription_nodes,
)
from dlc_ledger.services.subscriptions.groups import ResourceGroup, resource_group, resource_groups
from dlc_ledger.services.subscriptions.orders import (
    Cancellation,
    Order,
    cancel,
    find_subscription,
    purchase,
    renew,
    subscription_row,
    subscriptions,
    term_rows,
)
from dlc_ledger.services.subscriptions.plans import Plan, buy_plan, carve_plan, parse_plan
from dlc_ledger.services.subscriptions.reports import GROUP_BY, subscription_report, term_credits
from dlc_ledger.services.subscriptions.showback import (
    PREPAID_KEYS,
    add_prepaid,
    check_keys,
    prepaid,
)

__all__ = [
    "GROUP_BY",
    "PREPAID_KEYS",
    "Cancellation",
    "NodesAdded",
    "NodesScheduled",
    "Order",
    "Plan",
    "ResourceGroup",
    "SpecChange",
    "add_prepaid",
    "add_subscription_nodes",
    "buy_plan",
    "cancel",
    "carve_plan",
    "change_rows",
    "change_spec",
    "check_keys",
    "find_subscription",
    "parse_plan",
    "prepaid",
    "purchase",
    "renew",
    "resource_group",
    "resource_groups",
    "schedule_subscription_nodes",
    "subscription_report",
    "subscription_row",
    "subscriptions",
    "term_credits",
    "term_rows",
]
