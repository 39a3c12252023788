"""Engine construction: one place that knows how DLC Ledger talks to PostgreSQL.

Accepts the usual ``postgresql://user@host:port/db`` URL (driver suffixes such as
``+psycopg`` too), pins every session to UTC so timestamps read back unchanged,
and decodes JSONB with orjson because projections read millions of rows.
"""

from __future__ import annotations

from typing import Any

import orjson
from psycopg.types.json import set_json_loads
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

__all__ = ["make_engine", "normalise_url"]


def normalise_url(url: str) -> str:
    """``postgres://`` / ``postgresql://`` / ``postgresql+driver://`` → ``postgresql+psycopg://``."""
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
        raise ValueError(f"DATABASE_URL {url!r} is not a database URL") from exc
    backend = parsed.get_backend_name()
    if backend not in ("postgresql", "postgres"):
        raise ValueError(f"DATABASE_URL must be a PostgreSQL URL, got {backend!r}")
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
