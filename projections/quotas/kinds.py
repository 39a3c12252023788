"""Quota usage split by kind: how much of each node's ``used`` is training, services and
notebooks, at an instant.

The platform's three products share one quota tree (docs/workloads.md). The quota fold keeps
each pod's interval, quota and resources (``quota_occupancies``) and the workloads among the
jobs (``quota_workloads``); here the pods open at the instant are summed per kind and
settled through one :class:`~ledger.usage_boards.UsageBoard` per kind, under the tree in
force then, so a kind's figure at a node counts flavors and sums leaves exactly as the
node's ``used`` does, and the kinds add up to it.
"""

from __future__ import annotations

from datetime import datetime

import orjson
from sqlalchemy import Connection, text

from ledger.usage_boards import NUMBERS, RAW, Key, UsageBoard
from projections.quotas.reads import specs_at

__all__ = ["KINDS", "used_by_kind"]

#: The kinds, in the order reads list them.
KINDS = ("training", "service", "notebook")
_USED = NUMBERS.index("used")
_IDLE = RAW.index("idle_used")

_OPEN_AT = text(
    "SELECT o.quota, o.resources, o.idle, COALESCE(w.workload, 'training') "
    "FROM quota_occupancies o LEFT JOIN quota_workloads w USING (job_uid) "
    "WHERE o.started_at <= :at AND (o.ended_at IS NULL OR o.ended_at > :at)"
)
_LATEST = text(
    "SELECT greatest((SELECT max(at) FROM quota_changes), (SELECT max(at) FROM quota_tree_history))"
)


def used_by_kind(
    conn: Connection, at: datetime | None = None
) -> tuple[datetime | None, dict[Key, dict[str, int]]]:
    """Per quota node x flavor, the ``used`` of each kind with any, at ``at`` (latest: the
    latest change, the instant :func:`~projections.quotas.reads.usage_at` reads), and that
    instant."""
    if at is None:
        at = conn.execute(_LATEST).scalar()
        if at is None:
            return None, {}
    specs = specs_at(conn, at)
    boards = {kind: UsageBoard(specs) for kind in KINDS}
    for quota, resources, idle, kind in conn.execute(_OPEN_AT, {"at": at}):
        held = resources if isinstance(resources, dict) else orjson.loads(resources)
        board = boards.get(kind, boards["training"])
        for flavor, qty in held.items():
            raw = [0] * len(RAW)
            raw[0] = int(qty)
            if idle:
                raw[_IDLE] = int(qty)
            board.add(quota, flavor, raw)
    out: dict[Key, dict[str, int]] = {}
    for kind, board in boards.items():
        board.settle()
        for key, numbers in board.rows.items():
            if numbers[_USED]:
                out.setdefault(key, {})[kind] = numbers[_USED]
    return at, out
