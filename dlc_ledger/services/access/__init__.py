"""Who may call the API: bearer tokens issued, listed, revoked and checked
(:mod:`.tokens`, stored by :mod:`ledger.store.access_tokens`) and OpenID Connect JWTs
verified against an issuer's keys (:mod:`.oidc`), both giving a
:class:`~.tokens.Principal`."""

from dlc_ledger.services.access.oidc import (
    InvalidJwt,
    KeysUnavailable,
    OidcConfig,
    OidcVerifier,
    RolesRefused,
    looks_like_jwt,
)
from dlc_ledger.services.access.tokens import (
    DEFAULT_LIFETIME,
    SCRAPER_ROLES,
    Principal,
    TokenExpired,
    authenticate,
    create_token,
    list_tokens,
    parse_lifetime,
    parse_roles,
    revoke,
)

__all__ = [
    "DEFAULT_LIFETIME",
    "SCRAPER_ROLES",
    "InvalidJwt",
    "KeysUnavailable",
    "OidcConfig",
    "OidcVerifier",
    "Principal",
    "RolesRefused",
    "TokenExpired",
    "authenticate",
    "create_token",
    "list_tokens",
    "looks_like_jwt",
    "parse_lifetime",
    "parse_roles",
    "revoke",
]
