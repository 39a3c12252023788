"""``dlc-ledger``: the command line, and the composition root that wires the layers.

Every command's user error ends as one line on stderr and a non-zero exit code,
never a traceback: the handler in :func:`main` maps the errors users can cause
(bad configuration, unreachable services, invalid files) to messages.
"""

from __future__ import annotations

import sys

import click
import typer
from pydantic import ValidationError
from sqlalchemy.exc import OperationalError, ProgrammingError

from consumers.broker_cli import broker_app
from consumers.finance_cli import report_cost as _report_cost  # noqa: F401  (registers)
from consumers.ingest import ingest_app
from consumers.invoices_cli import billing_app, invoices_app
from consumers.jobs_cli import jobs_app
from consumers.prices_cli import prices_app
from consumers.projections_cli import project, projections_app
from consumers.quotas_cli import quotas_app
from consumers.replay_cli import replay
from consumers.report_cli import report_app
from consumers.store_cli import db_app, dead_letters_app, verify
from consumers.watch_cli import watch
from ledger.store.base import StoreError

__all__ = ["app", "entrypoint", "main"]

app = typer.Typer(
    name="dlc-ledger",
    help="Event-sourced ledger, quota and billing backend for GPU training platforms.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(db_app, name="db")
app.add_typer(dead_letters_app, name="dead-letters")
app.add_typer(broker_app, name="broker")
app.add_typer(report_app, name="report")
app.command("verify")(verify)

# Mount further command groups below, one line each (import above).
app.command("project")(project)
app.add_typer(projections_app, name="projections")
app.add_typer(jobs_app, name="jobs")
app.add_typer(quotas_app, name="quotas")
app.add_typer(prices_app, name="prices")
app.add_typer(billing_app, name="billing")
app.add_typer(invoices_app, name="invoices")
app.add_typer(ingest_app, name="ingest")
app.command("watch")(watch)
app.command("replay")(replay)


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


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OperationalError):
        return f"database unreachable: {str(exc.orig).strip().splitlines()[0]}"
    if isinstance(exc, ProgrammingError):
        return (
            f"database error: {str(exc.orig).strip().splitlines()[0]} "
            "(is the schema migrated? dlc-ledger db upgrade)"
        )
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"invalid configuration: {where}: {first['msg']}"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    try:
        # click returns an Exit's code instead of raising it when not standalone
        code = app(args=argv, prog_name="dlc-ledger", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (
        StoreError,
        OperationalError,
        ProgrammingError,
        ValidationError,
        ValueError,
        OSError,
        RuntimeError,
    ) as exc:
        print(f"dlc-ledger: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
