"""Resource groups: what was bought into each, what the cluster delivered, who draws on it.

A group is named by the subscriptions bought into it and by the node label
``dlc.ledger/resource-group`` the watcher reads (docs/subscriptions.md). Per group, at an
instant: the spec, subscribed nodes (schedulable subscriptions), delivered nodes (nodes
of the group the watcher has seen, live then), the capacity per flavor the subscriptions
give, and the quotas whose guarantee draws on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ledger.errors import NotFound
from ledger.store.base import EventStore
from ledger.subscriptions import drawing_groups, group_capacity
from projections.inventory import capacity_at
from projections.quotas import specs_at
from projections.subscriptions import load_subscriptions

__all__ = ["ResourceGroup", "resource_group", "resource_groups"]


@dataclass(frozen=True)
class ResourceGroup:
    group: str
    spec: str | None
    subscribed_nodes: int
    delivered_nodes: int
    capacity: dict[str, int]  # flavor/cpu/memory -> quota units (mGPU, milli-cores, MiB)
    quotas: tuple[str, ...]  # quotas that draw on it (named, or inherited from a parent)
    subscriptions: tuple[str, ...]


def resource_groups(store: EventStore, at: datetime) -> list[ResourceGroup]:
    """Every resource group known at ``at`` (bought into, or seen on a node), by name."""
    subs = list(load_subscriptions(store).values())
    capacity = group_capacity(subs, at)
    with store.reading() as conn:
        delivered = {
            str(row["resource_group"]): int(row["nodes"])
            for row in capacity_at(conn, at, ["resource_group"])
        }
        # the tree in force at ``at``: a quota applied later does not draw on it yet
        drawn = drawing_groups(specs_at(conn, at))
    names = sorted({s.group for s in subs} | set(delivered) - {"default"})
    out = []
    for name in names:
        mine = [s for s in subs if s.group == name]
        out.append(
            ResourceGroup(
                group=name,
                spec=mine[0].spec if mine else None,
                subscribed_nodes=sum(s.nodes_at(at) for s in mine),
                delivered_nodes=delivered.get(name, 0),
                capacity=capacity.get(name, {}),
                quotas=tuple(sorted(q for q, groups in drawn.items() if name in groups)),
                subscriptions=tuple(s.subscription_id for s in mine),
            )
        )
    return out


def resource_group(store: EventStore, name: str, at: datetime) -> ResourceGroup:
    for group in resource_groups(store, at):
        if group.group == name:
            return group
    known = ", ".join(g.group for g in resource_groups(store, at)) or "none"
    raise NotFound(f"no resource group {name!r} (known: {known})")
