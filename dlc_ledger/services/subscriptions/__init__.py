"""The subscriptions context's use cases, in one place: orders (purchase, renew, cancel:
:mod:`.orders`), the resource groups they fill (:mod:`.groups`), the utilisation report
(:mod:`.reports`), prepaid cost shown back to workspaces (:mod:`.showback`) and a replay's
subscription plan (:mod:`.plans`). The renewal itself is decided in
:mod:`processes.subscriptions` (for the scheduler and by hand alike), the rules in
:mod:`ledger.subscriptions`, the view in :mod:`projections.subscriptions`."""

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
from dlc_ledger.services.subscriptions.reports import GROUP_BY, subscription_report
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
    "Order",
    "Plan",
    "ResourceGroup",
    "add_prepaid",
    "buy_plan",
    "cancel",
    "carve_plan",
    "check_keys",
    "find_subscription",
    "parse_plan",
    "prepaid",
    "purchase",
    "renew",
    "resource_group",
    "resource_groups",
    "subscription_report",
    "subscription_row",
    "subscriptions",
    "term_rows",
]
