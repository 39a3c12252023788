"""Database roles: least privilege enforced by PostgreSQL, not by the code that connects.

``dlc-ledger db upgrade`` runs as the schema owner (the only role that may migrate) and, after
the migrations, creates two NOLOGIN group roles and grants them every table of the schema:

- ``dlc_ledger_writer`` (ingest, projectors, billing, dispatcher, watchers): SELECT and INSERT on
  ``events``; SELECT, INSERT, UPDATE, DELETE on checkpoints and read models; SELECT, INSERT,
  UPDATE on ``dead_letters``; SELECT on ``alembic_version``.
- ``dlc_ledger_reader`` (reports, the API): SELECT on every table and view.

Neither owns a table, so neither can disable the append-only trigger, TRUNCATE ``events`` or
change the schema. The grants cover every table present after the upgrade (future ones included:
the step runs after every upgrade). On PostgreSQL 17 and later the writer also holds MAINTAIN on
the tables it may rewrite, so ``projections rebuild`` run as a writer still vacuums and analyzes
them. ``dlc_ledger_app``, the single role of earlier versions, is kept as a deprecated member of
the writer. Roles are cluster-wide: creating them is idempotent and tolerates a concurrent
creator (test databases share one server).

The components connect as LOGIN roles that are members of one group (docs/store.md). On a
server the operator runs, the operator creates them; on the embedded server, which the CLI
owns, :func:`ensure_login` creates :data:`READER_LOGIN` and :data:`WRITER_LOGIN` with
generated passwords (``dlc_ledger/wiring/embedded_postgres.py``).
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, text

__all__ = [
    "APP_ROLE",
    "LOGINS",
    "READER_LOGIN",
    "READER_ROLE",
    "WRITER_LOGIN",
    "WRITER_ROLE",
    "NotSchemaOwner",
    "ensure_login",
    "grant_roles",
    "require_schema_owner",
]

WRITER_ROLE = "dlc_ledger_writer"
READER_ROLE = "dlc_ledger_reader"
APP_ROLE = "dlc_ledger_app"  # deprecated: a member of the writer
#: the embedded server's logins: the API and the read commands; the services and the writes
READER_LOGIN = "dlc_ledger_api"
WRITER_LOGIN = "dlc_ledger_service"
#: each login and the one group it is a member of
LOGINS = {READER_LOGIN: READER_ROLE, WRITER_LOGIN: WRITER_ROLE}
_PASSWORD = re.compile(r"^[A-Za-z0-9_-]{16,}$")
_MAINTAIN_SINCE = 170000  # server_version_num of PostgreSQL 17, the first with MAINTAIN

# tables the writer may only append to / read: evidence and the schema's own bookkeeping
_APPEND_ONLY = {"events": "SELECT, INSERT", "dead_letters": "SELECT, INSERT, UPDATE"}
_READ_ONLY = {"alembic_version"}


class NotSchemaOwner(PermissionError):
    """``db upgrade`` was run by a role that does not own the schema's tables."""


def _create_role(conn: Connection, role: str) -> None:
    # CREATE ROLE has no IF NOT EXISTS; a concurrent creator on the same cluster raises
    # duplicate_object or unique_violation, which means the role exists: the goal is met.
    conn.execute(
        text(
            f"""
            DO $$ BEGIN
              IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
                CREATE ROLE {role} NOLOGIN;
              END IF;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END $$
            """
        )
    )


def _grant_membership(conn: Connection, role: str, member: str) -> None:
    conn.execute(
        text(
            f"""
            DO $$ BEGIN
              IF NOT pg_has_role('{member}', '{role}', 'MEMBER') THEN
                GRANT {role} TO {member};
              END IF;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END $$
            """
        )
    )


def ensure_login(conn: Connection, login: str, password: str) -> None:
    """``login`` (one of :data:`LOGINS`) as a LOGIN role with ``password``, a member of its
    group; created, or its password and membership set again. The password is generated
    (URL-safe characters only, so the statement holds no quote or bind-parameter colon)."""
    group = LOGINS[login]  # a KeyError for any other name: these are spliced into SQL
    if not _PASSWORD.match(password):
        raise ValueError("a login's password holds letters, digits, '-' and '_' only")
    _create_role(conn, group)
    _create_role(conn, login)
    literal = conn.execute(text("SELECT quote_literal(:p)"), {"p": password}).scalar_one()
    conn.execute(text(f"ALTER ROLE {login} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                      f"PASSWORD {literal}"))  # fmt: skip
    _grant_membership(conn, group, login)


def require_schema_owner(conn: Connection) -> None:
    """Refuse to migrate as anyone but the owner of the existing tables (or a superuser).

    Without this, a writer running ``db upgrade`` on an up-to-date schema would "succeed"
    (PostgreSQL only warns when a GRANT grants nothing)."""
    row = conn.execute(
        text(
            "SELECT c.relname, pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
            "AND NOT pg_has_role(current_user, c.relowner, 'USAGE') LIMIT 1"
        )
    ).first()
    if row is not None:
        user = conn.execute(text("SELECT current_user")).scalar_one()
        raise NotSchemaOwner(
            f"database role {user!r} does not own the schema (table {row[0]} belongs to "
            f"{row[1]!r}): run `dlc-ledger db upgrade` with the owner's DATABASE_URL"
        )


def grant_roles(conn: Connection) -> None:
    """Create the roles if needed and grant them every table and view of the schema."""
    for role in (WRITER_ROLE, READER_ROLE, APP_ROLE):
        _create_role(conn, role)
    _grant_membership(conn, WRITER_ROLE, APP_ROLE)
    relations = conn.execute(
        text(
            "SELECT c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm') "
            "ORDER BY c.relname"
        )
    ).all()
    both = f"{WRITER_ROLE}, {READER_ROLE}"
    schema = _schema(conn)
    version = int(conn.execute(text("SHOW server_version_num")).scalar_one())
    maintain = ", MAINTAIN" if version >= _MAINTAIN_SINCE else ""
    conn.execute(text(f"GRANT USAGE ON SCHEMA {schema} TO {both}"))
    for name, kind in relations:
        table = f'"{name}"'
        # start from nothing, so a privilege granted by hand or by an older version goes
        conn.execute(text(f"REVOKE ALL ON {table} FROM {both}"))
        conn.execute(text(f"GRANT SELECT ON {table} TO {both}"))
        if kind not in ("r", "p") or name in _READ_ONLY:
            continue
        writes = _APPEND_ONLY.get(name, f"SELECT, INSERT, UPDATE, DELETE{maintain}")
        conn.execute(text(f"GRANT {writes} ON {table} TO {WRITER_ROLE}"))
    conn.execute(text(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {WRITER_ROLE}"))


def _schema(conn: Connection) -> str:
    return f'"{conn.execute(text("SELECT current_schema()")).scalar_one()}"'
