"""``dlc-ledger``: the command line, and the composition root that wires the layers.

Every command's user error ends as one line on stderr and a non-zero exit code,
never a traceback: the handler in :func:`main` maps the errors users can cause
(bad configuration, unreachable services, invalid files) to messages.
"""

from __future__ import annotations

import sys

import typer

from consumers.lazy_groups import lazy_group

__all__ = ["COMMANDS", "app", "entrypoint", "main"]

# Command name -> "module:attribute" (a Typer app or a command function), imported
# only when used (consumers/lazy_groups.py); listed in this order after ``demo``.
COMMANDS = {
    "replay": "consumers.replay_cli:replay",
    "watch": "consumers.watch_cli:watch",
    "ingest": "consumers.ingest:ingest_app",
    "project": "consumers.projections_cli:project",
    "projections": "consumers.projections_cli:projections_app",
    "jobs": "consumers.jobs_cli:jobs_app",
    "quotas": "consumers.quotas_cli:quotas_app",
    "report": "consumers.report_cli:report_app",
    "prices": "consumers.prices_cli:prices_app",
    "billing": "consumers.invoices_cli:billing_app",
    "invoices": "consumers.invoices_cli:invoices_app",
    "verify": "consumers.store_cli:verify",
    "db": "consumers.store_cli:db_app",
    "dead-letters": "consumers.store_cli:dead_letters_app",
    "broker": "consumers.broker_cli:broker_app",
}

app = typer.Typer(
    name="dlc-ledger",
    cls=lazy_group(COMMANDS),
    help="Event-sourced ledger, quota and billing backend for GPU training platforms.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    # a callback makes the app a group even with one eagerly registered command
    pass


@app.command("demo")
def demo(
    fresh: bool = typer.Option(False, "--fresh", help="Start from an empty database."),
    yes: bool = typer.Option(
        False, "--yes", help="With --fresh and DATABASE_URL set: confirm dropping its tables."
    ),
) -> None:
    """Run the main job on embedded defaults and print what it found."""
    from consumers.demo import run_demo

    run_demo(fresh=fresh, yes=yes)


def _user_error(exc: Exception) -> bool:
    """Whether ``exc`` is one users can cause (bad configuration, unreachable services,
    invalid files). Imported here, not at the top: a command that raised one has loaded
    these modules already, and ``--help`` needs none of them."""
    from pydantic import ValidationError
    from sqlalchemy.exc import StatementError

    from ledger.store.base import StoreError

    return isinstance(
        exc,
        (
            StoreError,
            StatementError,  # DataError, IntegrityError, ...: input the database refused
            ValidationError,
            ValueError,
            OSError,
            RuntimeError,
        ),
    )


def _one_line(exc: BaseException) -> str:
    from pydantic import ValidationError
    from sqlalchemy.exc import DataError, OperationalError, ProgrammingError, StatementError

    if isinstance(exc, OperationalError):
        return f"database unreachable: {str(exc.orig).strip().splitlines()[0]}"
    if isinstance(exc, ProgrammingError) and getattr(exc.orig, "sqlstate", None) == "42501":
        # insufficient_privilege: the role (docs/store.md) or the append-only trigger refused
        return f"refused by the database: {str(exc.orig).strip().splitlines()[0]}"
    if isinstance(exc, ProgrammingError):
        return (
            f"database error: {str(exc.orig).strip().splitlines()[0]} "
            "(is the schema migrated? dlc-ledger db upgrade)"
        )
    if isinstance(exc, StatementError):
        # the driver's own message, never str(exc): that one carries the SQL and the
        # parameters (values a user typed, a password in a URL parameter)
        reason = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
        word = "invalid value" if isinstance(exc, DataError) else "database error"
        return f"{word}: {reason or type(exc.orig).__name__}"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"invalid configuration: {where}: {first['msg']}"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    try:
        # click returns an Exit's code instead of raising it when not standalone
        code = app(args=argv, prog_name="dlc-ledger", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except typer.TyperException as exc:  # usage errors: typer vendors click's exceptions
        show = getattr(exc, "show", None)
        if callable(show):  # click's UsageError: the usage line, the hint, the message
            show()
        else:
            print(f"dlc-ledger: error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not _user_error(exc):
            raise
        from consumers.tables import escape_controls  # messages quote names from events

        print(f"dlc-ledger: error: {escape_controls(_one_line(exc))}", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
