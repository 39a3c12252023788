"""Bearer authentication: the request's :class:`Principal`, or a 401/403 problem.

Two kinds of bearer value: our own API tokens (``dlct_…``), looked up on every request
(one indexed equality on its sha256, so a revocation takes effect at once), and, when the
server is configured for it, OIDC JWTs verified by :mod:`dlc_ledger.services.access.oidc`
against the identity provider's keys and mapped to the same roles. Once known, the
principal spends one request of its rate limit (:mod:`dlc_ledger.api.rate_limits`; 429
when none is left). Most routes only read what every role may read, narrowed for a
workspace token by its scope, which each route passes into the SQL
(``principal.scope``). A route only some roles may use at all (chain verification)
declares them with :func:`require_roles`: anyone else gets a 403 problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dlc_ledger.api.rate_limits import RateLimiter
from dlc_ledger.services.access import (
    InvalidJwt,
    KeysUnavailable,
    OidcVerifier,
    Principal,
    RolesRefused,
    TokenExpired,
    authenticate,
    looks_like_jwt,
)

__all__ = [
    "CurrentPrincipal",
    "current_principal",
    "event_source",
    "ledger_principal",
    "require_roles",
]

_bearer = HTTPBearer(
    auto_error=False,
    description=(
        "A token from `dlc-ledger tokens create`, or an OIDC JWT when the server has "
        "DLC_OIDC_ISSUER, DLC_OIDC_AUDIENCE and DLC_OIDC_JWKS (docs/api.md)."
    ),
)
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
# RFC 6750 §3.1: a presented token that is refused is an "invalid_token"
_INVALID = {"WWW-Authenticate": 'Bearer error="invalid_token"'}


def _from_jwt(verifier: OidcVerifier | None, token: str) -> Principal:
    if verifier is None:
        raise HTTPException(
            401, "OIDC JWTs are not accepted by this server (no DLC_OIDC_* settings)", _INVALID
        )
    try:
        return verifier.verify(token)
    except InvalidJwt as exc:
        raise HTTPException(401, str(exc), _INVALID) from None
    except RolesRefused as exc:
        raise HTTPException(403, str(exc)) from None
    except KeysUnavailable as exc:
        raise HTTPException(503, str(exc)) from None


def current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None:
        raise HTTPException(401, "a bearer token is required", headers=_CHALLENGE)
    presented = credentials.credentials
    if looks_like_jwt(presented):
        principal = _from_jwt(request.app.state.oidc, presented)
    else:
        try:
            found = authenticate(request.app.state.store, presented)
        except TokenExpired as exc:
            raise HTTPException(401, str(exc), _INVALID) from None
        if found is None:
            raise HTTPException(401, "unknown or revoked token", headers=_CHALLENGE)
        principal = found
    request.state.principal = principal  # for the access log
    limiter: RateLimiter | None = getattr(request.app.state, "rate_limits", None)
    if limiter is not None and (wait := limiter.take(principal.token_id)) is not None:
        raise HTTPException(
            429,
            f"more than {limiter.burst} requests at once or {limiter.rate:g} a second "
            f"with this token; retry in {wait} s",
            {"Retry-After": str(wait)},
        )
    return principal


async def ledger_principal(
    principal: Annotated[Principal, Depends(current_principal)],
) -> Principal:  # no IO: run on the event loop, not in a worker thread
    """The principal of a ``/v1`` request: a ``metrics`` token scrapes ``/metrics`` and
    reads nothing else (403), though the rest of ``/v1`` would only show it empty pages."""
    if principal.metrics_only:
        raise HTTPException(403, "a metrics token reads /metrics only")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(ledger_principal)]


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency admitting only principals holding one of ``roles`` (else 403):
    ``principal: Annotated[Principal, Depends(require_roles("admin", "auditor"))]``."""
    allowed = frozenset(roles)

    def check(principal: CurrentPrincipal) -> Principal:
        if allowed.isdisjoint(principal.roles):
            raise HTTPException(403, f"this route needs the role {' or '.join(sorted(allowed))}")
        return principal

    return check


#: the longest ``source`` an envelope takes (:class:`ledger.envelopes.Envelope`)
_MAX_SOURCE = 200


def event_source(principal: Principal) -> str:
    """Who the events a request appends name: the token's name and id, as the access log
    does (``api/<name>(<id>)``), the name cut to fit an envelope's ``source``."""
    tail = f"({principal.token_id})"
    return f"api/{principal.name[: _MAX_SOURCE - len('api/') - len(tail)]}{tail}"
