"""Cluster inventory over time: nodes, and the pools, resource groups and flavors they form.

Every node change (NodeRegistered, NodeCordoned, NodeRemoved) closes the node's
current version and, unless the node was removed, opens a new one, so the table
holds validity intervals ``[valid_from, valid_to)`` and any past instant can be
asked about ("what capacity did pool X have on the 3rd?"). Cordoned and removed
nodes count as nodes but contribute no capacity.

Decided once: a cordon or removal of a node never registered is ignored (no
capacity to describe); a re-registration with unchanged attributes is a no-op and
keeps the cordon state; an event stamped before the current version began is
taken to happen at that version's start, so intervals never run backwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    Table,
    Text,
    text,
)

from ledger.errors import Invalid
from ledger.store.base import RecordedEvent, UnitOfWork
from ledger.store.schema import metadata
from projections.base import Projection
from projections.bulk import fetch_keyed, upsert_rows
from projections.pages import MAX_REPORT_ROWS, check_report_rows

__all__ = ["INVENTORY_GROUP_KEYS", "InventoryProjection", "capacity_at", "inventory_nodes"]

inventory_nodes = Table(
    "inventory_nodes",
    metadata,
    Column("node", Text, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("valid_from", DateTime(timezone=True), nullable=False),
    Column("valid_to", DateTime(timezone=True)),
    Column("pool", Text, nullable=False),
    Column("resource_group", Text, nullable=False),
    Column("flavor", Text, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("cpu_milli", BigInteger, nullable=False),
    Column("memory_mib", BigInteger, nullable=False),
    Column("billing_mode", Text, nullable=False),
    Column("cordoned", Boolean, nullable=False),
    Column("position", BigInteger, nullable=False),
    Index("inventory_nodes_open", "node", postgresql_where=text("valid_to IS NULL")),
    Index("inventory_nodes_from", "valid_from"),
)

INVENTORY_GROUP_KEYS = ("pool", "resource_group", "flavor", "billing_mode", "node")
_SPEC = ("pool", "resource_group", "flavor", "gpus", "cpu_milli", "memory_mib", "billing_mode")


@dataclass(slots=True)
class _Version:
    node: str
    seq: int
    valid_from: datetime
    valid_to: datetime | None
    pool: str
    resource_group: str
    flavor: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    billing_mode: str
    cordoned: bool
    position: int

    def row(self) -> tuple[Any, ...]:
        # astuple() deep-copies every field; these are immutable already
        return tuple(getattr(self, f.name) for f in fields(self))


class InventoryProjection(Projection):
    name = "inventory"
    cost = 0.1
    tables = (inventory_nodes,)
    event_types = frozenset({"NodeRegistered", "NodeCordoned", "NodeRemoved"})

    def apply(self, uow: UnitOfWork, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        names = {e.data["node"] for e in events if e.type in self.event_types}
        if not names:
            return
        # the open version of each node, and its highest seq (a removed node has none open)
        current: dict[str, _Version | None] = dict.fromkeys(names)
        last_seq: dict[str, int] = dict.fromkeys(names, 0)
        for row in fetch_keyed(
            conn,
            "SELECT DISTINCT ON (node) "
            + ", ".join(f'"{c.name}"' for c in inventory_nodes.columns)
            + " FROM inventory_nodes WHERE node = ANY(%s) ORDER BY node, seq DESC",
            (sorted(names),),
        ):
            version = _Version(*row)
            last_seq[version.node] = version.seq
            current[version.node] = version if version.valid_to is None else None
        written: dict[tuple[str, int], _Version] = {}
        for event in events:
            kind = event.type
            if kind not in self.event_types:
                continue
            data = event.data
            node = data["node"]
            open_version = current[node]
            at = event.occurred_at
            if open_version is not None and at < open_version.valid_from:
                at = open_version.valid_from
            if kind == "NodeRegistered":
                spec = {k: data[k] for k in _SPEC if k in data}
                if open_version is not None and all(
                    getattr(open_version, k) == v for k, v in spec.items()
                ):
                    continue
                base = _Version(
                    node, 0, at, None, "default", "default", "gpu/any", 0, 0, 0, "public", False, 0
                )
                cordoned = open_version.cordoned if open_version is not None else False
                new: _Version | None = replace(base, **spec, cordoned=cordoned)
            elif open_version is None:
                continue  # never registered, or already removed
            elif kind == "NodeCordoned":
                cordoned = bool(data.get("cordoned", True))
                if cordoned == open_version.cordoned:
                    continue
                new = replace(open_version, cordoned=cordoned)
            else:  # NodeRemoved
                new = None
            if open_version is not None:
                open_version.valid_to = at
                written[(node, open_version.seq)] = open_version
            if new is not None:
                last_seq[node] += 1
                new.seq = last_seq[node]
                new.valid_from = at
                new.valid_to = None
                new.position = event.position
                written[(node, new.seq)] = new
            current[node] = new
        upsert_rows(
            conn,
            inventory_nodes,
            [written[k].row() for k in sorted(written)],
            key=["node", "seq"],
        )


def capacity_at(
    conn: Connection, at: datetime | None, group_by: Sequence[str]
) -> list[dict[str, Any]]:
    """Nodes and schedulable capacity per group, now (``at=None``) or at an instant.

    ``gpus``/``mgpu``, ``cpu_milli`` and ``memory_mib`` count only nodes that are
    neither cordoned nor removed; ``nodes`` counts every live node,
    ``cordoned_nodes`` the cordoned ones.
    """
    unknown = [g for g in group_by if g not in INVENTORY_GROUP_KEYS]
    if unknown:
        raise Invalid(
            f"cannot group by {', '.join(unknown)}; choose from {', '.join(INVENTORY_GROUP_KEYS)}"
        )
    keys = ", ".join(f'"{g}"' for g in group_by)
    select_keys = f"{keys}, " if keys else ""
    group = f"GROUP BY {keys} ORDER BY {keys}" if keys else ""
    when = (
        "valid_to IS NULL"
        if at is None
        else "valid_from <= CAST(:at AS timestamptz) "
        "AND (valid_to IS NULL OR valid_to > CAST(:at AS timestamptz))"
    )
    result = conn.execute(
        text(
            f"""
            SELECT {select_keys}
                   count(*) AS nodes,
                   count(*) FILTER (WHERE cordoned) AS cordoned_nodes,
                   coalesce(sum(gpus) FILTER (WHERE NOT cordoned), 0)::bigint AS gpus,
                   coalesce(sum(gpus * 1000) FILTER (WHERE NOT cordoned), 0)::bigint AS mgpu,
                   coalesce(sum(cpu_milli) FILTER (WHERE NOT cordoned), 0)::bigint AS cpu_milli,
                   coalesce(sum(memory_mib) FILTER (WHERE NOT cordoned), 0)::bigint
                     AS memory_mib
            FROM inventory_nodes
            WHERE {when}
            {group}
            LIMIT :cap
            """
        ),
        {"at": at, "cap": MAX_REPORT_ROWS + 1},
    )
    rows = [dict(r._mapping) for r in result]
    check_report_rows(len(rows), hint="group by fewer or coarser keys (pool, flavor)")
    return rows
