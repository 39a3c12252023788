"""``dlc-ledger``: the command line, and the composition root that wires the layers.

Every command's user error ends as one line on stderr and a non-zero exit code,
never a traceback: the handler in :func:`main` maps the errors users can cause
(bad configuration, unreachable services, invalid files) to messages.
"""

from __future__ import annotations

import sys

import typer

from dlc_ledger.cli.lazy_groups import lazy_group

__all__ = ["COMMANDS", "app", "entrypoint", "main"]

# Command name -> "module:attribute" (a Typer app or a command function), imported
# only when used (dlc_ledger/cli/lazy_groups.py); listed in this order after ``demo``.
COMMANDS = {
    "replay": "dlc_ledger.cli.replay:replay",
    "watch": "dlc_ledger.cli.watch:watch",
    "ingest": "dlc_ledger.cli.ingest:ingest_app",
    "project": "dlc_ledger.cli.projections:project",
    "projections": "dlc_ledger.cli.projections:projections_app",
    "jobs": "dlc_ledger.cli.jobs:jobs_app",
    "quotas": "dlc_ledger.cli.quotas:quotas_app",
    "report": "dlc_ledger.cli.report:report_app",
    "prices": "dlc_ledger.cli.prices:prices_app",
    "billing": "dlc_ledger.cli.invoices:billing_app",
    "invoices": "dlc_ledger.cli.invoices:invoices_app",
    "budgets": "dlc_ledger.cli.budgets:budgets_app",
    "verify": "dlc_ledger.cli.store:verify",
    "db": "dlc_ledger.cli.store:db_app",
    "dead-letters": "dlc_ledger.cli.store:dead_letters_app",
    "broker": "dlc_ledger.cli.broker:broker_app",
    "dispatcher": "dlc_ledger.cli.dispatcher:dispatcher_app",
    "queue": "dlc_ledger.cli.queue:queue_app",
    "dispatch": "dlc_ledger.cli.dispatch:dispatch",
    "tokens": "dlc_ledger.cli.tokens:tokens_app",
    "api": "dlc_ledger.cli.api:api_app",
    "up": "dlc_ledger.cli.up:up",
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
def _root(
    wait_for: int | None = typer.Option(
        None,
        "--wait-for",
        metavar="POSITION",
        help="Before a read: wait until every read model has projected this store position "
        "(read-your-writes after a write elsewhere).",
    ),
    wait_timeout: float = typer.Option(
        10.0, "--wait-timeout", metavar="SECONDS", help="The longest --wait-for waits (≤ 30)."
    ),
) -> None:
    # a callback makes the app a group even with one eagerly registered command
    if wait_for is not None:
        from dlc_ledger.wiring import context

        context.read_wait = (wait_for, wait_timeout)


@app.command("demo")
def demo(
    fresh: bool = typer.Option(False, "--fresh", help="Start from an empty database."),
    yes: bool = typer.Option(
        False, "--yes", help="With --fresh and DATABASE_URL set: confirm dropping its tables."
    ),
) -> None:
    """Run the main job on embedded defaults and print what it found."""
    from dlc_ledger.cli.demo import run_demo

    run_demo(fresh=fresh, yes=yes)


def _user_error(exc: Exception) -> bool:
    """Whether ``exc`` is one users can cause (bad configuration, unreachable services,
    invalid files). Imported here, not at the top: a command that raised one has loaded
    these modules already, and ``--help`` needs none of them."""
    from pydantic import ValidationError
    from sqlalchemy.exc import StatementError

    from ledger.errors import LedgerError
    from ledger.store.base import StoreError

    return isinstance(
        exc,
        (
            LedgerError,
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
        from dlc_ledger.cli.tables import escape_controls  # messages quote names from events

        print(f"dlc-ledger: error: {escape_controls(_one_line(exc))}", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
