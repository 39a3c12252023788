"""Secret grants for the tests' rules: an admin lets a workspace name a variable."""

from __future__ import annotations

from dlc_ledger.services.notifications import grant_secret
from ledger.store.base import EventStore

__all__ = ["grant"]


def grant(store: EventStore, workspace: str, *variables: str) -> None:
    for variable in variables:
        grant_secret(store, workspace, variable, principal="test")
