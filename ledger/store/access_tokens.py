"""The API's bearer tokens table and its SQL: create, list, revoke, look up by hash.

Kept beside the read models because it is plain SQL on the same database, but it is no
projection: tokens are access configuration, not events, and a rebuild never touches it.
The rules (role names, secret format, hashing) live in :mod:`dlc_ledger.services.access.tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ARRAY, Column, Connection, DateTime, Table, Text, update

from ledger.store.schema import metadata

__all__ = [
    "StoredToken",
    "api_tokens",
    "insert_token",
    "revoke_token",
    "stored_tokens",
    "token_by_hash",
]

_TS = DateTime(timezone=True)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("secret_sha256", Text, nullable=False, unique=True),
    Column("roles", ARRAY(Text), nullable=False),
    Column("created_at", _TS, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("revoked_at", _TS),
    Column("expires_at", _TS),  # NULL: never (migration 0020_token_expiry)
)


@dataclass(frozen=True)
class StoredToken:
    token_id: str
    name: str
    roles: tuple[str, ...]
    created_at: datetime
    created_by: str
    revoked_at: datetime | None
    expires_at: datetime | None = None  # None: never

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


def _stored(row: object) -> StoredToken:
    return StoredToken(
        token_id=row.token_id,  # type: ignore[attr-defined]
        name=row.name,  # type: ignore[attr-defined]
        roles=tuple(row.roles),  # type: ignore[attr-defined]
        created_at=row.created_at,  # type: ignore[attr-defined]
        created_by=row.created_by,  # type: ignore[attr-defined]
        revoked_at=row.revoked_at,  # type: ignore[attr-defined]
        expires_at=row.expires_at,  # type: ignore[attr-defined]
    )


def insert_token(
    conn: Connection,
    *,
    token_id: str,
    name: str,
    secret_sha256: str,
    roles: Sequence[str],
    created_at: datetime,
    created_by: str,
    expires_at: datetime | None,
) -> None:
    conn.execute(
        api_tokens.insert().values(
            token_id=token_id,
            name=name,
            secret_sha256=secret_sha256,
            roles=list(roles),
            created_at=created_at,
            created_by=created_by,
            expires_at=expires_at,
        )
    )


def stored_tokens(conn: Connection) -> list[StoredToken]:
    """Every token, revoked ones included, oldest first (never the hash)."""
    query = api_tokens.select().order_by(api_tokens.c.created_at, api_tokens.c.token_id)
    return [_stored(row) for row in conn.execute(query)]


def revoke_token(conn: Connection, token_id: str, at: datetime) -> bool | None:
    """Mark ``token_id`` revoked at ``at``: True if it was live, False if already revoked,
    None if there is no such token."""
    row = conn.execute(
        api_tokens.select().where(api_tokens.c.token_id == token_id).with_for_update()
    ).first()
    if row is None:
        return None
    if row.revoked_at is not None:
        return False
    conn.execute(update(api_tokens).where(api_tokens.c.token_id == token_id).values(revoked_at=at))
    return True


def token_by_hash(conn: Connection, secret_sha256: str) -> StoredToken | None:
    """The unrevoked token whose secret hashes to ``secret_sha256``, expired or not (the
    caller compares ``expires_at`` with its clock, and says "expired")."""
    row = conn.execute(
        api_tokens.select().where(
            api_tokens.c.secret_sha256 == secret_sha256, api_tokens.c.revoked_at.is_(None)
        )
    ).first()
    return None if row is None else _stored(row)
