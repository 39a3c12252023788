"""Bearer-token authentication: the request's :class:`Principal`, or a 401 problem.

The token is looked up on every request (one indexed equality on its sha256), so a
revocation takes effect at once. Most routes only read what every role may read,
narrowed for a workspace token by its scope, which each route passes into the SQL
(``principal.scope``), never applied to results afterwards. A route only some roles may
use at all (chain verification) declares them with :func:`require_roles`: anyone else
gets a 403 problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dlc_ledger.services.tokens import Principal, authenticate

__all__ = ["CurrentPrincipal", "current_principal", "require_roles"]

_bearer = HTTPBearer(auto_error=False, description="A token from `dlc-ledger tokens create`.")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None:
        raise HTTPException(401, "a bearer token is required", headers=_CHALLENGE)
    principal = authenticate(request.app.state.store.engine, credentials.credentials)
    if principal is None:
        raise HTTPException(401, "unknown or revoked token", headers=_CHALLENGE)
    request.state.principal = principal  # for the access log
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency admitting only principals holding one of ``roles`` (else 403):
    ``principal: Annotated[Principal, Depends(require_roles("admin", "auditor"))]``."""
    allowed = frozenset(roles)

    def check(principal: CurrentPrincipal) -> Principal:
        if allowed.isdisjoint(principal.roles):
            raise HTTPException(403, f"this route needs the role {' or '.join(sorted(allowed))}")
        return principal

    return check
