"""Capacity that follows subscriptions, and the quota guarantees that draw on it.

A resource group's capacity at an instant is its schedulable subscriptions' nodes x
their spec's resources (GPUs in mGPU of the spec's flavor, milli-cores, MiB). A quota
draws on the groups it names, or on its nearest ancestor's; one that draws on none runs
on public capacity. ``quotas apply`` refuses a tree whose guarantees exceed what their
groups hold (:func:`capacity_problems`); GPUs of any model count against ``gpu/*``
guarantees together, since a guarantee of ``gpu/any`` can be met by any model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from ledger.events import NodeSpec, QuotaSpec
from ledger.subscriptions.model import Subscription

__all__ = [
    "capacity_problems",
    "drawing_groups",
    "group_capacity",
    "node_resources",
]

Amounts = dict[str, int]


def node_resources(node: NodeSpec, nodes: int = 1) -> Amounts:
    """What ``nodes`` nodes of ``node``'s spec hold, in quota units."""
    return {
        node.flavor: node.gpus * 1000 * nodes,
        "cpu": node.cpu_milli * nodes,
        "memory": node.memory_mib * nodes,
    }


def _add(into: Amounts, more: Mapping[str, int]) -> None:
    for key, qty in more.items():
        into[key] = into.get(key, 0) + qty


def group_capacity(subs: Iterable[Subscription], at: datetime) -> dict[str, Amounts]:
    """Each group's schedulable capacity at ``at`` (groups with none left out)."""
    out: dict[str, Amounts] = {}
    for sub in subs:
        if sub.schedulable_at(at):
            _add(out.setdefault(sub.group, {}), node_resources(sub.node, sub.nodes))
    return out


def drawing_groups(specs: Mapping[str, QuotaSpec]) -> dict[str, tuple[str, ...]]:
    """The groups each quota draws on: its own, else its nearest ancestor's (or none)."""
    out: dict[str, tuple[str, ...]] = {}

    def groups_of(name: str, seen: frozenset[str] = frozenset()) -> tuple[str, ...]:
        if name in out:
            return out[name]
        spec = specs.get(name)
        if spec is None or name in seen:
            return ()
        found = spec.resource_groups or (
            groups_of(spec.parent, seen | {name}) if spec.parent else ()
        )
        out[name] = found
        return found

    for name in specs:
        groups_of(name)
    return out


def _totals(amounts: Mapping[str, int]) -> Amounts:
    # every GPU model counts towards one "gpu" figure: a gpu/any guarantee takes any model
    out: Amounts = {}
    for key, qty in amounts.items():
        _add(out, {"gpu" if key.startswith("gpu/") else key: qty})
    return out


def _shortfalls(need: Amounts, have: Amounts) -> list[str]:
    return [
        f"{key} {qty:,} > {have.get(key, 0):,}"
        for key, qty in sorted(need.items())
        if qty > have.get(key, 0)
    ]


def capacity_problems(
    specs: Mapping[str, QuotaSpec], capacity: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """Why the guarantees of ``specs`` exceed the subscribed ``capacity`` they draw on
    (empty: they fit). Each quota naming groups must fit in them, and the quotas naming
    groups with no ancestor that does (the tops, whose children carve their guarantee)
    must together fit in the groups they name."""
    problems: list[str] = []
    unknown = sorted({g for s in specs.values() for g in s.resource_groups} - set(capacity))
    for group in unknown:
        users = sorted(q for q, s in specs.items() if group in s.resource_groups)
        problems.append(
            f"resource group {group!r} (named by {', '.join(users)}) has no subscribed capacity"
        )
    drawn = drawing_groups(specs)
    tops: dict[tuple[str, ...], Amounts] = {}
    for name, spec in sorted(specs.items()):
        if not spec.resource_groups:
            continue
        have: Amounts = {}
        for group in spec.resource_groups:
            _add(have, _totals(capacity.get(group, {})))
        short = _shortfalls(_totals(spec.min), have)
        if short:
            problems.append(
                f"quota {name!r} guarantees more than its groups "
                f"{', '.join(spec.resource_groups)} hold: {'; '.join(short)}"
            )
        if not (spec.parent and drawn.get(spec.parent)):
            _add(tops.setdefault(spec.resource_groups, {}), _totals(spec.min))
    for groups, need in sorted(tops.items()):
        have = {}
        for group in groups:
            _add(have, _totals(capacity.get(group, {})))
        short = _shortfalls(need, have)
        quotas = sorted(q for q, s in specs.items() if s.resource_groups == groups)
        if short and len(quotas) > 1:
            problems.append(
                f"quotas {', '.join(quotas)} together guarantee more than groups "
                f"{', '.join(groups)} hold: {'; '.join(short)}"
            )
    return problems
