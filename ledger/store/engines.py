"""Engine construction: one place that knows how DLC Ledger talks to PostgreSQL.

Accepts the usual ``postgresql://user@host:port/db`` URL (driver suffixes such as
``+psycopg`` too), pins every session to UTC so timestamps read back unchanged,
and decodes JSONB with orjson because projections read millions of rows.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from psycopg.types.json import set_json_loads
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from ledger.errors import Invalid

__all__ = ["has_password", "make_engine", "masked_url", "normalise_url"]

# ``scheme://user:PASSWORD@``: what masking hides when the URL does not even parse
_USERINFO_PASSWORD = re.compile(r"(://[^/?#@:]*:)[^/?#@]*@")
# libpq also takes ``?password=`` in the query string
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: the only form of a database URL
    that is ever printed (a message, a log line), even when the URL does not parse."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:
        shown = _USERINFO_PASSWORD.sub(r"\1***@", url)
    return _QUERY_PASSWORD.sub(r"\1***", shown)


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password (parsed, or by its ``user:password@`` part)."""
    if _QUERY_PASSWORD.search(url):
        return True
    try:
        return make_url(url).password is not None
    except Exception:
        return _USERINFO_PASSWORD.search(url) is not None


def normalise_url(url: str) -> str:
    """``postgres://`` / ``postgresql://`` / ``postgresql+driver://`` → ``postgresql+psycopg://``."""
    try:
        parsed = make_url(url)
    except Exception:  # sqlalchemy raises ArgumentError with a terse message
        raise Invalid(f"DATABASE_URL {masked_url(url)!r} is not a database URL") from None
    backend = parsed.get_backend_name()
    if backend not in ("postgresql", "postgres"):
        raise Invalid(f"DATABASE_URL must be a PostgreSQL URL, got {backend!r}")
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def make_engine(url: str, *, pool_size: int = 5, **kwargs: Any) -> Engine:
    engine = create_engine(
        normalise_url(url),
        pool_size=pool_size,
        pool_pre_ping=True,
        connect_args={"options": "-c timezone=UTC", "connect_timeout": 10},
        **kwargs,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        set_json_loads(orjson.loads, dbapi_connection)

    return engine
