"""Run the Alembic migrations programmatically (``dlc-ledger db upgrade``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

__all__ = ["Branch", "current_revision", "downgrade", "schema_branches", "upgrade"]


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


@dataclass(frozen=True)
class Branch:
    """One independent migration branch (a projection's tables): applied vs newest."""

    label: str
    applied: str | None  # the branch's revision in the database; None: not applied
    newest: str

    @property
    def up_to_date(self) -> bool:
        return self.applied == self.newest


def schema_branches(engine: Engine) -> list[Branch]:
    """Every branch of the migration tree with its applied and newest revision, by label."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_config(engine))

    def label(rev: str) -> str:
        node = script.get_revision(rev)
        while node is not None:
            if node.branch_labels:
                return sorted(node.branch_labels)[0]
            down = node.down_revision
            if down is None or not isinstance(down, str):
                return node.revision
            node = script.get_revision(down)
        return rev

    with engine.connect() as conn:
        applied = MigrationContext.configure(conn).get_current_heads()
    by_label = {label(rev): rev for rev in applied}
    return sorted(
        (Branch(label(head), by_label.get(label(head)), head) for head in script.get_heads()),
        key=lambda b: b.label,
    )
