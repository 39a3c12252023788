"""A subscription plan file: what a replay (the demo's) buys, carves and gives back.

``subscriptions:`` lists purchases (each with an idempotency ``key``, so a second run
buys nothing) and optional cancellations, ``after`` an offset from the replay's epoch;
``draws:`` names, per quota of the tree, the resource groups it draws on. The format is
``dlc_ledger/resources/subscriptions/demo.yaml``'s. Applied in two steps around the
quota tree: :func:`buy_plan` before it (a tree that draws on groups is checked against
what was bought), :func:`carve_plan` after it (the draws, then the cancellations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dlc_ledger.services.quotas import draw_on_groups
from dlc_ledger.services.subscriptions.orders import cancel, purchase, subscriptions
from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.errors import Invalid, NotFound
from ledger.events import SubscriptionTermUnit
from ledger.money import format_minor
from ledger.store.base import EventStore

__all__ = ["Plan", "buy_plan", "carve_plan", "parse_plan"]

_OFFSET = re.compile(r"^(\d+)([dh])$")
_FIELDS = {"key", "group", "spec", "nodes", "term", "auto_renew", "workspace", "after", "cancel"}


@dataclass(frozen=True)
class PlannedCancel:
    after: timedelta
    immediately: bool
    reason: str


@dataclass(frozen=True)
class PlannedPurchase:
    key: str
    group: str
    spec: str
    nodes: int
    term: SubscriptionTermUnit
    auto_renew: bool
    workspace: str
    after: timedelta
    cancel: PlannedCancel | None


@dataclass(frozen=True)
class Plan:
    purchases: tuple[PlannedPurchase, ...]
    draws: dict[str, tuple[str, ...]]


def _offset(value: Any, where: str) -> timedelta:
    if value is None:
        return timedelta(0)
    match = _OFFSET.match(str(value))
    if not match:
        raise Invalid(f"{where}: after must be like 12d or 36h, got {value!r}")
    n, unit = int(match.group(1)), match.group(2)
    return timedelta(days=n) if unit == "d" else timedelta(hours=n)


def _purchase(index: int, raw: Any) -> PlannedPurchase:
    where = f"subscriptions[{index}]"
    if not isinstance(raw, dict):
        raise Invalid(f"{where}: a mapping of {', '.join(sorted(_FIELDS))}")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise Invalid(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = sorted({"key", "group", "spec", "nodes", "term", "workspace"} - set(raw))
    if missing:
        raise Invalid(f"{where}: missing {', '.join(missing)}")
    if raw["term"] not in ("month", "year"):
        raise Invalid(f"{where}: term must be month or year, got {raw['term']!r}")
    nodes = raw["nodes"]
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise Invalid(f"{where}: nodes must be a whole number >= 1, got {nodes!r}")
    planned_cancel = None
    if raw.get("cancel") is not None:
        c = raw["cancel"]
        if not isinstance(c, dict) or "after" not in c:
            raise Invalid(f"{where}.cancel: a mapping with after (and immediately, reason)")
        planned_cancel = PlannedCancel(
            _offset(c["after"], f"{where}.cancel"),
            bool(c.get("immediately", False)),
            str(c.get("reason", "")),
        )
    return PlannedPurchase(
        key=str(raw["key"]),
        group=str(raw["group"]),
        spec=str(raw["spec"]),
        nodes=nodes,
        term=raw["term"],
        auto_renew=bool(raw.get("auto_renew", False)),
        workspace=str(raw["workspace"]),
        after=_offset(raw.get("after"), where),
        cancel=planned_cancel,
    )


def parse_plan(text: str) -> Plan:
    """A plan from its YAML text; every problem is one :class:`Invalid`."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise Invalid(str(exc)) from None
    if not isinstance(raw, dict) or set(raw) - {"subscriptions", "draws"}:
        raise Invalid("a subscription plan is a mapping of subscriptions: [...] and draws: {...}")
    items = raw.get("subscriptions") or []
    draws = raw.get("draws") or {}
    if not isinstance(items, list) or not isinstance(draws, dict):
        raise Invalid("subscriptions must be a list and draws a mapping of quota to groups")
    for quota, groups in draws.items():
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise Invalid(f"draws.{quota}: a list of resource group names")
    return Plan(
        tuple(_purchase(i, item) for i, item in enumerate(items)),
        {str(q): tuple(g) for q, g in draws.items()},
    )


def buy_plan(store: EventStore, plan: Plan, epoch: datetime, principal: str) -> list[str]:
    """Buy every planned subscription (idempotent by key); one line each."""
    lines = []
    for p in plan.purchases:
        order = purchase(
            store,
            group=p.group,
            spec=p.spec,
            nodes=p.nodes,
            term=p.term,
            workspace=p.workspace,
            principal=principal,
            auto_renew=p.auto_renew,
            at=epoch + p.after,
            key=p.key,
        )
        sub = order.subscription
        money = format_minor(sub.terms[0].amount_minor, sub.scale, sub.currency)
        verb = "bought" if order.created else "already bought"
        lines.append(
            f"{verb} {sub.subscription_id} ({p.key}): {p.nodes} x {p.spec} in {p.group} for "
            f"{p.workspace}, a {p.term}{' auto-renewed' if p.auto_renew else ''}, {money}"
        )
    return lines


def carve_plan(store: EventStore, plan: Plan, epoch: datetime, principal: str) -> list[str]:
    """Point the planned quotas at their groups, then make the planned cancellations."""
    lines = []
    if plan.draws:
        result = draw_on_groups(store, plan.draws, principal=principal, at=epoch)
        lines.extend(result.lines)
    bought = {s.key: s for s in subscriptions(store) if s.key is not None}
    for p in plan.purchases:
        if p.cancel is None:
            continue
        planned = bought.get(p.key)
        if planned is None:
            raise NotFound(f"the plan cancels {p.key!r}, which was not bought (buy_plan first)")
        if planned.cancelled is not None or planned.expired is not None:
            continue  # cancelled by an earlier run (or over)
        done = cancel(
            store,
            planned.subscription_id,
            principal=principal,
            immediately=p.cancel.immediately,
            at=epoch + p.cancel.after,
            reason=p.cancel.reason,
        )
        sub = done.subscription
        refund = format_minor(done.refund.amount_minor, sub.scale, sub.currency)
        lines.append(f"cancelled {sub.subscription_id} ({p.key}): refund {refund}")
    return lines
