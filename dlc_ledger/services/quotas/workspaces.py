"""Which workspaces the ledger knows, and the one refusal of a write naming another.

A workspace is known once the quota tree binds it or a job ran in it
(:func:`projections.jobs.known_workspaces`). A write that names a workspace for it to
pay or to see (a purchase, a budget, a token's ``workspace:<id>`` role) is refused for an
unknown one unless the caller says it means it (``--allow-unknown-workspace``,
``allow_unknown_workspace``): a typo would otherwise bill nobody, cap nothing, or make a
token that sees nothing. The quota tree is what introduces workspaces, so ``quotas
apply`` binding a new one is not refused (its names are checked, :func:`check_name`).
"""

from __future__ import annotations

from collections.abc import Iterable

from dlc_ledger.services.errors import InvalidRequest
from ledger.store.base import EventStore
from projections.jobs import known_workspaces

__all__ = ["SHOWN_KNOWN", "refuse_unknown_workspaces"]

#: how many known workspaces a refusal lists (the rest are counted)
SHOWN_KNOWN = 20


def refuse_unknown_workspaces(
    store: EventStore, named: Iterable[str], *, field: str, override: str
) -> None:
    """An :class:`InvalidRequest` naming ``field`` when a workspace of ``named`` is not
    known, listing (some of) the known ones and the ``override`` that accepts it."""
    wanted = set(named)
    if not wanted:
        return
    with store.reading() as conn:
        known = known_workspaces(conn)
    unknown = sorted(wanted - known)
    if not unknown:
        return
    listed = sorted(known)
    shown = ", ".join(listed[:SHOWN_KNOWN]) or "none"
    if len(listed) > SHOWN_KNOWN:
        shown += f", and {len(listed) - SHOWN_KNOWN:,} more"
    raise InvalidRequest(
        f"{field}: unknown workspace(s) {', '.join(unknown)}: no quota binds them and no job "
        f"ran in them (known: {shown}); {override}"
    )
