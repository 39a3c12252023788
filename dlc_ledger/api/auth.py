"""Bearer-token authentication: the request's :class:`Principal`, or a 401 problem.

The token is looked up on every request (one indexed equality on its sha256), so a
revocation takes effect at once. Every route so far only reads, which every role may;
workspace scoping is passed into the SQL by each route (``principal.scope``), never
applied to results afterwards.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dlc_ledger.services.tokens import Principal, authenticate

__all__ = ["CurrentPrincipal", "current_principal"]

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
