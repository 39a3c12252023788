"""What applying a quota tree changes: the events from one tree to another.

:func:`diff` is the apply command's plan; :func:`keep_absent` is the target of an apply
without ``--prune`` (what the file leaves out is kept, as ``kubectl apply`` does).
"""

from __future__ import annotations

from ledger.envelopes import EventData
from ledger.events import QuotaChanged, QuotaCreated, QuotaDeleted, WorkspaceBound
from ledger.quotas.model import QuotaTree, QuotaTreeError, topological_order
from ledger.quotas.validate import validate_tree

__all__ = ["diff", "keep_absent"]


def diff(current: QuotaTree, desired: QuotaTree) -> list[EventData]:
    """The events that turn ``current`` into ``desired``, and nothing else.

    Order: creations and changes with parents before children, then workspace
    (re)bindings (workspaces absent from ``desired`` are unbound), then deletions
    with children before parents.
    """
    events: list[EventData] = []
    for name in topological_order(desired.specs):
        spec = desired.specs[name]
        old = current.specs.get(name)
        if old is None:
            events.append(QuotaCreated(spec=spec))
        elif old != spec:
            events.append(QuotaChanged(spec=spec))
    for ws in sorted(set(current.bindings) | set(desired.bindings)):
        want = desired.bindings.get(ws)
        if current.bindings.get(ws) != want:
            events.append(WorkspaceBound(workspace=ws, quota=want))
    for name in reversed(topological_order(current.specs)):
        if name not in desired.specs:
            events.append(QuotaDeleted(quota_id=name))
    return events


def keep_absent(current: QuotaTree, desired: QuotaTree) -> tuple[QuotaTree, list[str], list[str]]:
    """``desired`` plus the quotas and bindings of ``current`` it does not name.

    What an apply without ``--prune`` aims at: a file that leaves a quota or a
    workspace out keeps it (as ``kubectl apply`` without ``--prune``), so an empty or
    truncated file deletes nothing. Returns the target tree and the kept quota ids and
    workspaces; raises :class:`QuotaTreeError` when the file and the kept nodes do not
    form a valid tree together.
    """
    kept_quotas = sorted(set(current.specs) - set(desired.specs))
    kept_bindings = sorted(set(current.bindings) - set(desired.bindings))
    tree = QuotaTree(
        specs={**{q: current.specs[q] for q in kept_quotas}, **desired.specs},
        bindings={**{w: current.bindings[w] for w in kept_bindings}, **desired.bindings},
    )
    try:
        validate_tree(tree)
    except QuotaTreeError as exc:
        raise QuotaTreeError(
            f"{exc}, once the quotas and bindings the file leaves out are kept "
            "(apply with --prune to delete them)"
        ) from exc
    return tree, kept_quotas, kept_bindings
