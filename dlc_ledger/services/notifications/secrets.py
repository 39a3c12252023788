"""Granting a workspace the sender's environment variables its rules may name (admin only).

A rule names the variable holding its webhook secret or apprise URL; it may name only a
variable granted to its workspace (:mod:`ledger.notifications.grants`). Granting one
already granted, or revoking one not granted, stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ledger.applies import ApplyChange, apply_envelopes, content_digest
from ledger.envelopes import Envelope
from ledger.errors import Invalid, NotFound
from ledger.events import NotificationSecretGranted, NotificationSecretRevoked
from ledger.notifications import ALL_WORKSPACES, grant_stream, is_variable_name
from ledger.store.base import EventStore
from projections.jobs import known_workspaces
from projections.notifications import secret_grants

__all__ = ["GrantChanged", "grant_rows", "grant_secret", "revoke_secret"]


@dataclass(frozen=True)
class GrantChanged:
    line: str
    events: list[Envelope]


def _check(store: EventStore, workspace: str, variable: str) -> None:
    if not is_variable_name(variable):
        raise Invalid(f"variable: an environment variable name (A-Z, 0-9, _), got {variable!r}")
    if workspace == ALL_WORKSPACES:
        return
    with store.reading() as conn:
        known = known_workspaces(conn)
    if workspace not in known:
        shown = ", ".join(sorted(known)[:20]) or "none yet"
        raise NotFound(f"workspace: unknown workspace {workspace!r} (known: {shown})")


def _change(
    store: EventStore,
    event: NotificationSecretGranted | NotificationSecretRevoked,
    *,
    principal: str,
    dry_run: bool,
) -> list[Envelope]:
    stream = grant_stream(event.workspace, event.variable)
    envelopes, expected = apply_envelopes(
        [ApplyChange(event, stream, content_digest(event))],
        store.stream_version,
        at=datetime.now(UTC),
        source=principal,
    )
    if not dry_run:
        store.append(envelopes, expected_versions=expected)
    return envelopes


def grant_secret(
    store: EventStore, workspace: str, variable: str, *, principal: str, dry_run: bool = False
) -> GrantChanged:
    """Let ``workspace``'s rules name ``variable``."""
    _check(store, workspace, variable)
    if variable in secret_grants(store).get(workspace, ()):
        return GrantChanged(f"{variable} is already granted to {workspace}", [])
    event = NotificationSecretGranted(workspace=workspace, variable=variable)
    envelopes = _change(store, event, principal=principal, dry_run=dry_run)
    return GrantChanged(f"granted {variable} to {workspace}", envelopes)


def revoke_secret(
    store: EventStore, workspace: str, variable: str, *, principal: str, dry_run: bool = False
) -> GrantChanged:
    """Take ``variable`` back from ``workspace``: its rules' deliveries through it fail
    from now on (the rules stay, and say why in their deliveries)."""
    if variable not in secret_grants(store).get(workspace, ()):
        raise NotFound(f"{variable} is not granted to {workspace!r}")
    event = NotificationSecretRevoked(workspace=workspace, variable=variable)
    envelopes = _change(store, event, principal=principal, dry_run=dry_run)
    return GrantChanged(f"revoked {variable} from {workspace}", envelopes)


def grant_rows(store: EventStore, workspace: str | None = None) -> list[dict[str, str]]:
    """The grants in force, one row per workspace and variable."""
    return [
        {"workspace": ws, "variable": var}
        for ws, held in sorted(secret_grants(store).items())
        if workspace is None or ws == workspace
        for var in sorted(held)
    ]
