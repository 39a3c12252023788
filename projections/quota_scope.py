"""A ``workspace:<id>`` token's quota subtree, in SQL: the reads that return quota rows
narrow them with it inside their own queries.

The subtree is the quota nodes the workspaces are bound to (``quota_workspaces``) and
every descendant of them in the current tree (``quota_nodes.parent``), one recursive
CTE. It is decided on the current tree, as access is decided now: a node moved out of
the subtree is not shown at past instants either. Ancestors are outside it (a team lead
sees their own nodes, not the cohort's); figures that need them (``available``,
lending) are computed over the whole tree by the reads and only the subtree's rows
leave (:mod:`projections.quota_nodes`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, text

__all__ = ["SUBTREE", "quota_in_scope", "quota_subtree", "subtree_condition"]

#: the subtree's quota ids, as a subquery; binds ``:scope_workspaces`` (text[])
SUBTREE = (
    "WITH RECURSIVE subtree(quota_id) AS ("
    "SELECT quota FROM quota_workspaces "
    "WHERE workspace = ANY(CAST(:scope_workspaces AS text[])) "
    "UNION "
    "SELECT n.quota_id FROM quota_nodes n JOIN subtree s ON n.parent = s.quota_id"
    ") SELECT quota_id FROM subtree"
)


def subtree_condition(
    column: str, workspaces: Collection[str] | None
) -> tuple[str, dict[str, Any]]:
    """A WHERE condition keeping rows whose ``column`` (a quota id expression) lies in
    the workspaces' subtree, and its parameters; ``TRUE`` for an unscoped caller (None)."""
    if workspaces is None:
        return "TRUE", {}
    return f"({column}) IN ({SUBTREE})", {"scope_workspaces": sorted(workspaces)}


def quota_subtree(conn: Connection, workspaces: Collection[str] | None) -> frozenset[str] | None:
    """The subtree's quota ids (None: unscoped, every quota)."""
    if workspaces is None:
        return None
    rows = conn.execute(text(SUBTREE), {"scope_workspaces": sorted(workspaces)})
    return frozenset(rows.scalars())


def quota_in_scope(conn: Connection, quota: str, workspaces: Collection[str] | None) -> bool:
    """Whether ``quota`` lies in the workspaces' subtree (always, unscoped)."""
    if workspaces is None:
        return True
    condition, params = subtree_condition(":quota", workspaces)
    return bool(conn.execute(text(f"SELECT {condition}"), {**params, "quota": quota}).scalar())
