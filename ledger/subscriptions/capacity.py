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
    "capacity_shortfalls",
    "drawing_groups",
    "expired_quotas",
    "group_capacity",
    "node_resources",
    "released_quotas",
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
        if sub.schedulable_at(at):  # nodes at ``at``: changes take effect at their instant
            _add(out.setdefault(sub.group, {}), node_resources(sub.node, sub.nodes_at(at)))
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


def capacity_shortfalls(
    specs: Mapping[str, QuotaSpec], capacity: Mapping[str, Mapping[str, int]]
) -> list[tuple[tuple[str, ...], str]]:
    """Why the guarantees of ``specs`` exceed the subscribed ``capacity`` they draw on, each
    with the quotas concerned (empty: they fit). Each quota naming groups must fit in them,
    and the quotas naming groups with no ancestor that does (the tops, whose children carve
    their guarantee) must together fit in the groups they name."""
    problems: list[tuple[tuple[str, ...], str]] = []
    unknown = sorted({g for s in specs.values() for g in s.resource_groups} - set(capacity))
    for group in unknown:
        users = tuple(sorted(q for q, s in specs.items() if group in s.resource_groups))
        problems.append(
            (
                users,
                f"resource group {group!r} (named by {', '.join(users)}) has no "
                "subscribed capacity",
            )
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
                (
                    (name,),
                    f"quota {name!r} guarantees more than its groups "
                    f"{', '.join(spec.resource_groups)} hold: {'; '.join(short)}",
                )
            )
        if not (spec.parent and drawn.get(spec.parent)):
            _add(tops.setdefault(spec.resource_groups, {}), _totals(spec.min))
    for groups, need in sorted(tops.items()):
        have = {}
        for group in groups:
            _add(have, _totals(capacity.get(group, {})))
        short = _shortfalls(need, have)
        quotas = tuple(sorted(q for q, s in specs.items() if s.resource_groups == groups))
        if short and len(quotas) > 1:
            problems.append(
                (
                    quotas,
                    f"quotas {', '.join(quotas)} together guarantee more than groups "
                    f"{', '.join(groups)} hold: {'; '.join(short)}",
                )
            )
    return problems


def capacity_problems(
    specs: Mapping[str, QuotaSpec], capacity: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """The messages of :func:`capacity_shortfalls` (empty: the guarantees fit)."""
    return [message for _, message in capacity_shortfalls(specs, capacity)]


def expired_quotas(
    specs: Mapping[str, QuotaSpec], subs: Iterable[Subscription], at: datetime
) -> frozenset[str]:
    """Quotas that draw on groups none of which has schedulable capacity at ``at``: the
    dispatcher admits nothing of theirs (pending reason ``SubscriptionExpired``)."""
    capacity = group_capacity(subs, at)
    return frozenset(
        q
        for q, groups in drawing_groups(specs).items()
        if groups and not any(capacity.get(g) for g in groups)
    )


def released_quotas(
    specs: Mapping[str, QuotaSpec], subs: Iterable[Subscription], at: datetime
) -> frozenset[str]:
    """Expired quotas whose groups had subscriptions, all released by ``at`` (expiry + the
    24-hour grace, or an immediate cancellation): their running jobs are stopped."""
    subs = list(subs)
    bought = {s.group for s in subs}
    held = {s.group for s in subs if s.starts_at <= at < s.released_at}
    drawn = drawing_groups(specs)
    return frozenset(
        q
        for q in expired_quotas(specs, subs, at)
        if any(g in bought for g in drawn[q]) and not any(g in held for g in drawn[q])
    )
