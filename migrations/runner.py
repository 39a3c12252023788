"""Run the Alembic migrations programmatically (``dlc-ledger db upgrade``).

Beside the migrations it runs, so the store below never imports the package above it;
the composition root (:mod:`dlc_ledger.wiring.context`) is its one caller in the product."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text

from ledger.errors import Unavailable
from ledger.store.roles import grant_roles, require_schema_owner

if TYPE_CHECKING:  # Alembic is imported by the functions that migrate, not by every command
    from alembic.config import Config

__all__ = [
    "HEADS",
    "Branch",
    "SchemaNotCurrent",
    "current_revision",
    "downgrade",
    "require_current",
    "schema_branches",
    "upgrade",
]


#: The newest revision of every branch: what ``alembic_version`` holds on a current schema.
#: Every command checks the schema before it runs; comparing with this set costs one
#: query, where asking Alembic costs ~80 ms of imports and a scan of the scripts
#: (tests/ledger/store/test_migrations.py keeps it equal to Alembic's heads).
HEADS = frozenset(
    {
        "0005",
        "0011",
        "0026_quota_workloads",
        "0014_dispatch",
        "0015_budgets",
        "0020_token_expiry",
        "0029_billing_credit_returns",
        "0019_notifications",
        "0022_extent",
        "0023_events_by_type",
    }
)


class SchemaNotCurrent(Unavailable):
    """The database schema is not at this version's heads; only ``db upgrade`` migrates."""


def _config(engine: Engine) -> Config:
    from alembic.config import Config

    here = Path(__file__).parent
    cfg = Config(str(here / "alembic.ini"))
    cfg.set_main_option("script_location", str(here))
    return cfg


def upgrade(engine: Engine, revision: str = "heads") -> None:
    """Apply migrations, then grant the roles every table (``ledger.store.roles``).

    Projections own independent branches off ``0001``, so the default target is every
    head. Only the schema owner may run it (:class:`~ledger.store.roles.NotSchemaOwner`)."""
    from alembic import command

    cfg = _config(engine)
    with engine.begin() as conn:
        require_schema_owner(conn)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        grant_roles(conn)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    cfg = _config(engine)
    with engine.begin() as conn:
        require_schema_owner(conn)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def _applied(engine: Engine) -> frozenset[str] | None:
    """The revisions in ``alembic_version`` (None: no such table: never migrated)."""
    with engine.connect() as conn:
        exists = conn.execute(text("SELECT to_regclass('alembic_version')")).scalar()
        if exists is None:
            return None
        return frozenset(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


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


def require_current(engine: Engine) -> None:
    """Raise :class:`SchemaNotCurrent` (one line) unless every branch is at its newest
    revision: commands other than ``db upgrade`` never migrate (least privilege)."""
    if _applied(engine) == HEADS:
        return  # the usual case, without Alembic
    from alembic.util.exc import CommandError

    try:
        behind = [b for b in schema_branches(engine) if not b.up_to_date]
    except CommandError as exc:  # a revision this version does not know: a newer schema
        raise SchemaNotCurrent(
            f"database schema is not one this version knows ({exc}): upgrade dlc-ledger"
        ) from exc
    if behind:
        which = ", ".join(f"{b.label} at {b.applied or 'none'}, newest {b.newest}" for b in behind)
        raise SchemaNotCurrent(
            f"database schema is behind ({which}): run `dlc-ledger db upgrade` as the schema owner"
        )
