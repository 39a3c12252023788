"""Which environment variables of the sender each workspace's rules may name.

A rule names the variable that holds its webhook secret or apprise URL, never the secret.
Without a grant any tenant could name any variable of the sender's environment, another
tenant's secret included, and have its deliveries signed with it. So an admin grants a
variable to a workspace (``NotificationSecretGranted``, revoked by
``NotificationSecretRevoked``, stream ``notification-secret/<workspace>/<variable>``), a
rule may name only its workspace's grants (checked when it is applied), and the sender
checks the grant again before each delivery (a revoked grant fails the delivery).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ledger.events import NotificationSecretGranted, NotificationSecretRevoked

__all__ = ["Grants", "grant_stream", "grants_of", "is_variable_name"]

Grants = Mapping[str, frozenset[str]]
_VARIABLE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


def is_variable_name(value: object) -> bool:
    """An environment variable name a rule or a grant may hold (A-Z, 0-9, _; at most 128)."""
    return isinstance(value, str) and _VARIABLE.match(value) is not None


def grant_stream(workspace: str, variable: str) -> str:
    return f"notification-secret/{workspace}/{variable}"


def grants_of(events: Iterable[NotificationSecretGranted | NotificationSecretRevoked]) -> Grants:
    """The grants in force after ``events`` (store order), by workspace."""
    out: dict[str, set[str]] = {}
    for event in events:
        held = out.setdefault(event.workspace, set())
        if isinstance(event, NotificationSecretGranted):
            held.add(event.variable)
        else:
            held.discard(event.variable)
    return {ws: frozenset(held) for ws, held in out.items() if held}
