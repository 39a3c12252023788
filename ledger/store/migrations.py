"""Run the Alembic migrations programmatically (``dlc-ledger db upgrade``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

__all__ = ["current_revision", "downgrade", "upgrade"]


def _config(engine: Engine) -> Config:
    import migrations

    here = Path(migrations.__file__).parent
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here))
    return cfg


def upgrade(engine: Engine, revision: str = "heads") -> None:
    """Apply migrations. Projections own independent branches off ``0001``, so the
    default target is every head."""
    cfg = _config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    cfg = _config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    """The applied head revisions (comma-separated: projections are branches), or None."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return ",".join(sorted(heads)) or None
