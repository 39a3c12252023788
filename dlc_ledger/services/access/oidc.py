"""OIDC bearer JWTs: verify one against the identity provider's published keys and map it to
the same :class:`~dlc_ledger.services.access.tokens.Principal` an API token gives.

Kept apart from the web framework so the rules (which algorithms, which claims, how roles
are read) are one small module. Only asymmetric signatures are accepted (RS256, ES256): a
key set is public, so ``none`` or an HMAC "signed" with a public key would let anyone mint
tokens. The key set comes from a file (re-read when it changes) or a URL (PyJWT's client,
which caches the set and refetches once for an unknown ``kid`` after a key rotation).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import jwt

from dlc_ledger.services.access.tokens import Principal, parse_roles
from dlc_ledger.services.errors import InvalidRequest

__all__ = [
    "ALGORITHMS",
    "InvalidJwt",
    "KeysUnavailable",
    "OidcConfig",
    "OidcRejected",
    "OidcVerifier",
    "RolesRefused",
    "looks_like_jwt",
]

ALGORITHMS = ("RS256", "ES256")
_REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]
_OUR_PREFIX = "dlct_"  # an API token from `tokens create`, never a JWT


class OidcRejected(Exception):
    """A JWT refused; the message is one line that names the reason."""


class InvalidJwt(OidcRejected):
    """Malformed, badly signed, expired, or for another issuer or audience (HTTP 401)."""


class RolesRefused(OidcRejected):
    """A valid token whose roles claim is missing or names an unknown role (HTTP 403)."""


class KeysUnavailable(OidcRejected):
    """The key set could not be fetched: no fault of the token (HTTP 503)."""


@dataclass(frozen=True)
class OidcConfig:
    """What the identity provider's tokens must say, and where its public keys are."""

    issuer: str
    audience: str
    jwks: str  # a file path, or an http(s) URL
    roles_claim: str = "roles"  # dotted for a nested claim: realm_access.roles
    name_claim: str = "sub"
    leeway_seconds: float = 30.0  # clock skew between the provider and us


def looks_like_jwt(value: str) -> bool:
    """Three non-empty dot-separated parts and not one of our own ``dlct_`` tokens."""
    parts = value.split(".")
    return not value.startswith(_OUR_PREFIX) and len(parts) == 3 and all(parts)


class _KeySource(Protocol):
    def keys(self, kid: str | None) -> Iterable[jwt.PyJWK]: ...


class _FileKeys:
    """A JWKS file, parsed once and again whenever its modification time changes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._loaded: tuple[int, jwt.PyJWKSet] | None = None
        self.keys(None)  # a missing or unusable file fails at startup, not per request

    def keys(self, kid: str | None) -> Iterable[jwt.PyJWK]:
        try:
            stamp = os.stat(self._path).st_mtime_ns
            if self._loaded is None or self._loaded[0] != stamp:
                self._loaded = (stamp, jwt.PyJWKSet.from_json(self._path.read_text()))
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise KeysUnavailable(f"JWKS file {self._path}: {exc}") from None
        return self._loaded[1].keys


class _UrlKeys:
    """A JWKS endpoint through PyJWT's client (set cached 5 minutes, refetched once for an
    unknown ``kid``)."""

    def __init__(self, url: str) -> None:
        self._client = jwt.PyJWKClient(url, lifespan=300, timeout=10)

    def keys(self, kid: str | None) -> Iterable[jwt.PyJWK]:
        try:
            if kid is None:
                return self._client.get_jwk_set().keys
            return [self._client.get_signing_key(kid)]
        except jwt.PyJWKClientConnectionError as exc:
            raise KeysUnavailable(f"JWKS {self._client.uri} unreachable: {exc}") from None
        except jwt.PyJWKClientError:
            return []  # no such kid, even after a refetch: the token's fault
        except (ValueError, jwt.PyJWTError) as exc:
            raise KeysUnavailable(f"JWKS {self._client.uri} unusable: {exc}") from None


def _key_source(jwks: str) -> _KeySource:
    if jwks.startswith(("https://", "http://")):
        return _UrlKeys(jwks)
    return _FileKeys(Path(jwks))


def _claim(claims: Mapping[str, Any], dotted: str) -> Any:
    """``claims[a][b]`` for ``a.b``; a literal key with dots wins (some providers use URLs)."""
    if dotted in claims:
        return claims[dotted]
    value: Any = claims
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class OidcVerifier:
    """Turns a presented JWT into a :class:`Principal`, or raises an :class:`OidcRejected`."""

    def __init__(self, config: OidcConfig) -> None:
        self.config = config
        self._source = _key_source(config.jwks)

    def verify(self, token: str) -> Principal:
        claims = self._claims(token)
        return Principal(
            token_id=f"oidc:{claims['sub']}",
            name=self._name(claims),
            roles=self._roles(claims),
        )

    def _signing_key(self, token: str) -> jwt.PyJWK:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise InvalidJwt(f"malformed JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise InvalidJwt(
                f"JWT algorithm {alg!r} is not accepted; one of {', '.join(ALGORITHMS)}"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidJwt("JWT header kid is not a string")
        candidates = [
            key
            for key in self._source.keys(kid)
            if (kid is None or key.key_id == kid) and key.public_key_use in ("sig", None)
        ]
        if not candidates:
            named = f"key {kid!r}" if kid else "signing key"
            raise InvalidJwt(f"no {named} in the JWKS ({self.config.jwks})")
        matching = [key for key in candidates if key.algorithm_name == alg]
        if not matching:
            raise InvalidJwt(
                f"the JWKS key for this JWT is for {candidates[0].algorithm_name}, "
                f"the JWT says {alg}"
            )
        if len(matching) > 1:
            raise InvalidJwt("JWT has no kid and the JWKS holds several keys for its algorithm")
        return matching[0]

    def _claims(self, token: str) -> dict[str, Any]:
        key = self._signing_key(token)
        cfg = self.config
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[key.algorithm_name],
                audience=cfg.audience,
                issuer=cfg.issuer,
                leeway=cfg.leeway_seconds,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidJwt(f"JWT expired{_when(token, 'exp', ' at ')}") from None
        except jwt.ImmatureSignatureError as exc:
            raise InvalidJwt(f"JWT not valid yet: {exc}") from None
        except jwt.InvalidAudienceError:
            raise InvalidJwt(
                f"JWT audience {_unverified(token, 'aud')!r} does not include {cfg.audience!r}"
            ) from None
        except jwt.InvalidIssuerError:
            raise InvalidJwt(
                f"JWT issuer {_unverified(token, 'iss')!r} is not {cfg.issuer!r}"
            ) from None
        except jwt.InvalidSignatureError:
            raise InvalidJwt(
                f"JWT signature does not verify with JWKS key {key.key_id or '(no kid)'}"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidJwt(f"JWT has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise InvalidJwt(f"invalid JWT: {exc}") from None
        if not isinstance(claims["sub"], str) or not claims["sub"]:
            raise InvalidJwt("JWT sub claim is not a non-empty string")
        return claims

    def _name(self, claims: Mapping[str, Any]) -> str:
        name = _claim(claims, self.config.name_claim)
        return name if isinstance(name, str) and name else str(claims["sub"])

    def _roles(self, claims: Mapping[str, Any]) -> tuple[str, ...]:
        where = self.config.roles_claim
        value = _claim(claims, where)
        if value is None:
            raise RolesRefused(f"JWT has no {where!r} claim: no role, no access")
        if isinstance(value, str):
            value = value.split()  # a space-separated list, as OAuth's `scope`
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise RolesRefused(f"JWT claim {where!r} is not a list of role strings")
        try:
            return parse_roles(value)
        except InvalidRequest as exc:
            raise RolesRefused(f"JWT claim {where!r}: {exc}") from None


def _unverified(token: str, claim: str) -> Any:
    """A claim for an error message, read without verification (the token was refused)."""
    try:
        return jwt.decode(token, options={"verify_signature": False}).get(claim)
    except jwt.PyJWTError:
        return None


def _when(token: str, claim: str, prefix: str) -> str:
    value = _unverified(token, claim)
    if not isinstance(value, int | float):
        return ""
    return prefix + datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
