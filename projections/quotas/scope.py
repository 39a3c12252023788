"""A ``workspace:<id>`` token's quota subtree, in SQL: the reads that return quota rows
narrow them with it inside their own queries.

Workspaces are bound to leaf quotas (``quota_workspaces``; the tree's rules allow no
other). A leaf is the token's when it, or an ancestor, is bound to one of its
workspaces; a node is in the token's subtree when every leaf under it is the token's:
its bound leaves, and each inner node made only of them (a team lead whose workspaces
fill a whole branch sees the branch's node too, with its lending and pending figures).
A node with a leaf of anyone else under it (``root``, a shared cohort) is outside. One
recursive CTE over the current tree (``quota_nodes.parent``), as access is decided
now: a node moved out of the subtree is not shown at past instants either. Figures
that need the nodes outside it (``available``, lending) are computed over the whole
tree by the reads, and only the subtree's rows leave (:mod:`projections.quotas.nodes`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, text

__all__ = ["SUBTREE", "quota_in_scope", "quota_subtree", "subtree_condition"]

#: the subtree's quota ids, as a subquery; binds ``:scope_workspaces`` (text[])
SUBTREE = (
    "WITH RECURSIVE below(top, quota_id) AS ("
    "SELECT quota_id, quota_id FROM quota_nodes "
    "UNION ALL "
    "SELECT b.top, n.quota_id FROM quota_nodes n JOIN below b ON n.parent = b.quota_id"
    "), owned AS ("
    "SELECT b.quota_id FROM below b WHERE b.top IN (SELECT quota FROM quota_workspaces "
    "WHERE workspace = ANY(CAST(:scope_workspaces AS text[])))"
    ") SELECT b.top FROM below b "
    "WHERE NOT EXISTS (SELECT 1 FROM quota_nodes c WHERE c.parent = b.quota_id) "
    "GROUP BY b.top HAVING bool_and(b.quota_id IN (SELECT quota_id FROM owned))"
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
