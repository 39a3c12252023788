"""API tokens and roles as use cases: create (the secret shown once), list, revoke, and
turn a presented bearer secret into a :class:`Principal`.

Roles: ``admin``, ``finance``, ``auditor``, ``workspace:<id>`` (repeatable) and
``metrics`` (``/metrics`` only: what Prometheus scrapes with). A principal with only
workspace roles is *scoped*: every read passes its workspaces to the SQL. Only the sha256
of a secret is stored: the secret has 256 random bits, so a plain hash is enough (no
password stretching needed) and lookup is one indexed equality.

A token expires (:data:`DEFAULT_LIFETIME` unless told otherwise; "never" only when asked
for): a leaked or forgotten one stops working on its own. :func:`authenticate` compares the
expiry with its clock and raises :class:`TokenExpired`, so the API can say "expired"
rather than "unknown".
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dlc_ledger.services.errors import InvalidRequest, NotFound
from dlc_ledger.services.quotas import refuse_unknown_workspaces
from ledger.bounds import MAX_LABEL_VALUE, MAX_NAME, check_name
from ledger.canonical import format_timestamp
from ledger.store.access_tokens import (
    StoredToken,
    insert_token,
    revoke_token,
    stored_tokens,
    token_by_hash,
)
from ledger.store.base import EventStore

__all__ = [
    "DEFAULT_LIFETIME",
    "GLOBAL_ROLES",
    "MAX_LIFETIME",
    "METRICS_ROLE",
    "SCRAPER_ROLES",
    "CreatedToken",
    "Principal",
    "TokenExpired",
    "authenticate",
    "create_token",
    "list_tokens",
    "parse_lifetime",
    "parse_roles",
    "revoke",
]

GLOBAL_ROLES = ("admin", "finance", "auditor")
#: reads ``/metrics`` and nothing else (a Prometheus scrape token)
METRICS_ROLE = "metrics"
#: the roles ``/metrics`` answers
SCRAPER_ROLES = ("admin", METRICS_ROLE)
#: a new token's life unless ``--expires-in`` says otherwise
DEFAULT_LIFETIME = timedelta(days=90)
#: the longest finite life (beyond it, ask for ``never``: a date ten years out is no bound)
MAX_LIFETIME = timedelta(days=3650)
_LIFETIME = re.compile(r"^([1-9][0-9]{0,6})([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_WORKSPACE = "workspace:"
_SECRET_PREFIX = "dlct_"


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: the token's name and id, and what its roles allow."""

    token_id: str
    name: str
    roles: tuple[str, ...]

    @property
    def workspaces(self) -> frozenset[str]:
        return frozenset(r[len(_WORKSPACE) :] for r in self.roles if r.startswith(_WORKSPACE))

    @property
    def scope(self) -> frozenset[str] | None:
        """The workspaces reads are limited to; None: every workspace (a global role)."""
        if any(r in GLOBAL_ROLES for r in self.roles):
            return None
        return self.workspaces

    @property
    def can_write(self) -> bool:
        return "admin" in self.roles

    @property
    def metrics_only(self) -> bool:
        """A scrape token: ``/metrics`` and no ``/v1`` route at all (403 there)."""
        return all(r == METRICS_ROLE for r in self.roles)


class TokenExpired(Exception):
    """A presented token is known and unrevoked but past its expiry."""

    def __init__(self, token_id: str, expired_at: datetime) -> None:
        super().__init__(f"token {token_id} expired at {format_timestamp(expired_at)}")
        self.token_id = token_id
        self.expired_at = expired_at


@dataclass(frozen=True)
class CreatedToken:
    token: StoredToken
    secret: str  # shown to the user once, never stored


def parse_roles(roles: Iterable[str]) -> tuple[str, ...]:
    """The roles, checked and deduplicated in their order; at least one."""
    parsed: list[str] = []
    for role in roles:
        role = role.strip()
        if role.startswith(_WORKSPACE):
            if not role[len(_WORKSPACE) :].strip():
                raise InvalidRequest(f"role {role!r} names no workspace (workspace:<id>)")
            check_name(role[len(_WORKSPACE) :], "role workspace:<id>", MAX_LABEL_VALUE)
        elif role not in (*GLOBAL_ROLES, METRICS_ROLE):
            raise InvalidRequest(
                f"unknown role {role!r}; one of {', '.join(GLOBAL_ROLES)}, {METRICS_ROLE}, "
                "workspace:<id>"
            )
        if role not in parsed:
            parsed.append(role)
    if not parsed:
        raise InvalidRequest("a token needs at least one role")
    return tuple(parsed)


def parse_lifetime(text: str) -> timedelta | None:
    """``90d``, ``12h``, ``30m``, ``2w`` as a duration; ``never`` as None (no expiry)."""
    text = text.strip().lower()
    if text == "never":
        return None
    match = _LIFETIME.match(text)
    if match is None:
        raise InvalidRequest(
            f"expiry {text!r}: a whole number of minutes, hours, days or weeks (30m, 12h, "
            "90d, 2w), or never"
        )
    life = timedelta(**{_UNITS[match[2]]: int(match[1])})
    if life > MAX_LIFETIME:
        raise InvalidRequest(
            f"expiry {text!r} is beyond {MAX_LIFETIME.days} days: say never if it should not expire"
        )
    return life


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    store: EventStore,
    roles: Iterable[str],
    *,
    name: str | None,
    created_by: str,
    now: datetime | None = None,
    known_only: bool = False,
    expires_in: timedelta | None = DEFAULT_LIFETIME,
) -> CreatedToken:
    """A new token for ``roles``, valid for ``expires_in`` from ``now`` (None: never);
    ``known_only``: a workspace role must name a workspace the ledger knows (a typo would
    otherwise make a token that sees nothing)."""
    checked = parse_roles(roles)
    if name is not None:
        check_name(name, "name", MAX_NAME)
    if expires_in is not None and not timedelta(0) < expires_in <= MAX_LIFETIME:
        raise InvalidRequest(f"a token lives more than 0 and at most {MAX_LIFETIME.days} days")
    if known_only:
        refuse_unknown_workspaces(
            store,
            (r[len(_WORKSPACE) :] for r in checked if r.startswith(_WORKSPACE)),
            field="role",
            override="--allow-unknown-workspace creates the token ahead of them",
        )
    token_id = "tok_" + secrets.token_hex(6)
    secret = _SECRET_PREFIX + secrets.token_urlsafe(32)
    at = now or datetime.now(UTC)
    expires_at = None if expires_in is None else at + expires_in
    with store.transaction() as uow:
        insert_token(
            uow.connection,
            token_id=token_id,
            name=name or token_id,
            secret_sha256=_hash(secret),
            roles=checked,
            created_at=at,
            created_by=created_by,
            expires_at=expires_at,
        )
    stored = StoredToken(token_id, name or token_id, checked, at, created_by, None, expires_at)
    return CreatedToken(stored, secret)


def list_tokens(store: EventStore) -> list[StoredToken]:
    with store.reading() as conn:
        return stored_tokens(conn)


def revoke(store: EventStore, token_id: str, *, now: datetime | None = None) -> bool:
    """Revoke ``token_id``; False if it was revoked already. Unknown ids are refused."""
    with store.transaction() as uow:
        done = revoke_token(uow.connection, token_id, now or datetime.now(UTC))
    if done is None:
        raise NotFound(f"no token with id {token_id!r}")
    return done


def authenticate(
    store: EventStore, secret: str, *, now: datetime | None = None
) -> Principal | None:
    """The principal of a live token with this secret, or None (unknown or revoked);
    :class:`TokenExpired` when it is past its expiry at ``now`` (default: the wall clock)."""
    if not secret.startswith(_SECRET_PREFIX):
        return None
    with store.reading() as conn:
        token = token_by_hash(conn, _hash(secret))
    if token is None:
        return None
    if token.expires_at is not None and token.expired(now or datetime.now(UTC)):
        raise TokenExpired(token.token_id, token.expires_at)
    return Principal(token.token_id, token.name, token.roles)
