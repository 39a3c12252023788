"""``dlc-ledger``: the command line, and the composition root that wires the layers.

Every refusal (a kind of :mod:`ledger.errors`, or the database's or a file's word on a
request, translated into one) ends as one line on stderr and exit code 1 (69 when
something needed is unavailable); anything else is a bug and shows its traceback and an
error id (exit 70): the one mapping is :func:`main`'s.
"""

from __future__ import annotations

import sys

import typer

from dlc_ledger.cli.lazy_groups import lazy_group

__all__ = ["COMMANDS", "SUMMARIES", "app", "entrypoint", "main"]

# Command name -> "module:attribute" (a Typer app or a command function), imported
# only when used (dlc_ledger/cli/lazy_groups.py); listed in this order after ``demo``.
COMMANDS = {
    "replay": "dlc_ledger.cli.replay:replay",
    "runs": "dlc_ledger.cli.runs:runs_app",
    "watch": "dlc_ledger.cli.watch:watch",
    "ingest": "dlc_ledger.cli.ingest:ingest_app",
    "project": "dlc_ledger.cli.projections:project",
    "projections": "dlc_ledger.cli.projections:projections_app",
    "jobs": "dlc_ledger.cli.jobs:jobs_app",
    "services": "dlc_ledger.cli.services:services_app",
    "notebooks": "dlc_ledger.cli.services:notebooks_app",
    "quotas": "dlc_ledger.cli.quotas:quotas_app",
    "report": "dlc_ledger.cli.report:report_app",
    "prices": "dlc_ledger.cli.prices:prices_app",
    "billing": "dlc_ledger.cli.invoices:billing_app",
    "invoices": "dlc_ledger.cli.invoices:invoices_app",
    "payments": "dlc_ledger.cli.payments:payments_app",
    "ledger": "dlc_ledger.cli.books:ledger_app",
    "budgets": "dlc_ledger.cli.budgets:budgets_app",
    "subscriptions": "dlc_ledger.cli.subscriptions:subscriptions_app",
    "resource-groups": "dlc_ledger.cli.resource_groups:resource_groups_app",
    "notifications": "dlc_ledger.cli.notifications:notifications_app",
    "verify": "dlc_ledger.cli.store:verify",
    "db": "dlc_ledger.cli.store:db_app",
    "dead-letters": "dlc_ledger.cli.store:dead_letters_app",
    "export": "dlc_ledger.cli.exports:export",
    "import": "dlc_ledger.cli.exports:import_",
    "broker": "dlc_ledger.cli.broker:broker_app",
    "dispatcher": "dlc_ledger.cli.dispatcher:dispatcher_app",
    "queue": "dlc_ledger.cli.queue:queue_app",
    "dispatch": "dlc_ledger.cli.dispatch:dispatch",
    "tokens": "dlc_ledger.cli.tokens:tokens_app",
    "api": "dlc_ledger.cli.api:api_app",
    "up": "dlc_ledger.cli.up:up",
}

# What ``dlc-ledger --help`` lists for each command, so listing them imports none of
# their modules (tests/dlc_ledger/cli/test_help.py checks each against its command's own help).
SUMMARIES = {
    "replay": "Replay a trace end to end; exit 0 once everything is stored and projected.",
    "runs": "Replay runs (open-loop, closed-loop, what-if-<policy>): list, choose the default.",
    "watch": "Watch the cluster and publish its facts to Kafka until SIGTERM / Ctrl-C.",
    "ingest": "Consume Kafka into the event store (exactly-once effects).",
    "project": "Bring projections up to date with the event store (once, or live with --follow).",
    "projections": "Read models: rebuild them, see how far behind they are.",
    "jobs": "Jobs: status, requested resources, audit timeline.",
    "services": "Inference services: replicas over time, occupancy, cost, quota.",
    "notebooks": "Notebook instances.",
    "quotas": "Quota tree: apply a YAML file, list, show usage.",
    "report": "Reports over the projections (table, JSON, CSV).",
    "prices": "Price books and spot prices.",
    "billing": "Rating, accrual and period close.",
    "invoices": "Invoices and credit notes.",
    "payments": "Payments received against invoices.",
    "ledger": "The books: trial balance, receivables, journal export.",
    "budgets": "Budgets per workspace and month: apply a YAML file, show, check.",
    "subscriptions": "Subscriptions: nodes bought into resource groups by the month or year.",
    "resource-groups": "Resource groups: subscribed and delivered nodes, capacity, quotas.",
    "notifications": (
        "The event centre: rules on job, quota, budget and subscription events; delivery."
    ),
    "verify": "Recompute the hash chain; exit 0 if intact, 1 naming the first broken position.",
    "db": "Database schema and connection.",
    "dead-letters": "Items a long-running part could not handle: quarantined, to retry or discard.",
    "export": (
        "Write the event store, every column of every event in position order, as gzip JSONL "
        "files with their hash-chain anchors and a manifest (one consistent snapshot)."
    ),
    "import": (
        "Restore an export into an empty database, checking its manifest and hash chain "
        "while loading; nothing is kept unless every event is."
    ),
    "broker": "Run the embedded Kafka-compatible broker (Tansu).",
    "dispatcher": "The dispatcher: admission and preemption decisions (Kueue semantics).",
    "queue": "Pending queues, in the dispatcher's order.",
    "dispatch": (
        "Admit, preempt and resume jobs from projected state (Kueue semantics); decisions "
        "are stored as events first, then acted on."
    ),
    "tokens": "API bearer tokens: create (shown once), list, revoke.",
    "api": "The HTTP API: serve it.",
    "up": (
        "Run every component (database, broker, cluster or kubesim, watcher, ingest, "
        "projector, billing, dispatcher, API and dashboard) and print the dashboard's URL "
        "and an admin token; Ctrl-C stops them all."
    ),
}

app = typer.Typer(
    name="dlc-ledger",
    cls=lazy_group(COMMANDS, SUMMARIES),
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
    run: str | None = typer.Option(
        None,
        "--run",
        metavar="NAME",
        help="The replay run to read and write (open-loop, closed-loop, what-if-<policy>; "
        "default DLC_RUN, else the run the last demo recorded: dlc-ledger runs).",
    ),
) -> None:
    # a callback makes the app a group even with one eagerly registered command
    if run is not None or "dlc_ledger.wiring.context" in sys.modules:
        from dlc_ledger.wiring import context

        # set on every run: an earlier in-process run's choice must not carry over
        context.run_choice = run
    if wait_for is not None or _waiting():
        from dlc_ledger.wiring import context

        # set on every run: an earlier in-process run's wait must not carry over
        context.read_wait = None if wait_for is None else (wait_for, wait_timeout)


def _waiting() -> bool:
    """Whether an earlier run in this process left a wait set (the wiring is loaded)."""
    context = sys.modules.get("dlc_ledger.wiring.context")
    return getattr(context, "read_wait", None) is not None


@app.command("demo")
def demo(
    fresh: bool = typer.Option(False, "--fresh", help="Start from an empty database."),
    yes: bool = typer.Option(
        False, "--yes", help="With --fresh and DATABASE_URL set: confirm dropping its tables."
    ),
    closed_loop: bool = typer.Option(
        True,
        "--closed-loop/--open-loop-only",
        help="After the open-loop replay, replay a window of the trace through the dispatcher.",
    ),
    what_if: str = typer.Option(
        "",
        "--what-if",
        metavar="POLICIES",
        help="Also replay the window under each of these queue policies (e.g. "
        "FIFO,Balance,Intelligent) and compare them; about a minute each.",
    ),
) -> None:
    """Run the main job on embedded defaults and print what it found."""
    from dlc_ledger.cli.demo import run_demo
    from dlc_ledger.cli.replay import parse_policy

    policies = [parse_policy(p.strip()) for p in what_if.split(",") if p.strip()]
    if policies and not closed_loop:
        raise typer.BadParameter("--what-if replays closed loop", param_hint="--open-loop-only")
    run_demo(fresh=fresh, yes=yes, closed_loop=closed_loop, what_if=policies)


#: Exit codes (docs/conventions.md, "Errors"): 1 the request was refused (its message says
#: why), 2 a usage error, 69 something needed is unavailable (try again), 70 a bug.
EXIT_REFUSED = 1
EXIT_UNAVAILABLE = 69
EXIT_BUG = 70


def _refusal(exc: BaseException) -> Exception | None:
    """``exc`` as a kind of the one error tree (:mod:`ledger.errors`) when users can cause
    it, else None (a bug). Imported here, not at the top: ``--help`` needs none of it."""
    from pydantic import ValidationError

    from ledger.errors import Conflict, Invalid, LedgerError, Unavailable
    from ledger.store.base import StoreError
    from ledger.store.failures import as_ledger_error

    if isinstance(exc, LedgerError):
        return exc
    if (known := as_ledger_error(exc)) is not None:
        return known
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return Invalid(f"invalid configuration: {where}: {first['msg']}")
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
        return Invalid(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    if isinstance(exc, ConnectionError | TimeoutError):
        return Unavailable(str(exc) or type(exc).__name__)
    if isinstance(exc, StoreError):
        return Conflict(str(exc))
    return None


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _bug(exc: BaseException) -> int:
    """Not the user's fault: the traceback, and an id to quote in a report."""
    import traceback
    import uuid

    error_id = uuid.uuid4().hex[:12]
    traceback.print_exception(exc, file=sys.stderr)
    print(
        f"dlc-ledger: internal error {error_id}: {type(exc).__name__}: {_one_line(exc)} "
        "(a bug, not your input: please report it with this id and the traceback above)",
        file=sys.stderr,
    )
    return EXIT_BUG


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
        # one line, as every refusal: what was wrong and where the help is (click's own
        # rendering is three lines: usage, hint, message)
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "dlc-ledger"
        hint = f" (see: {where} --help)" if ctx is not None else ""
        message = " ".join(exc.format_message().split())
        print(f"{where}: error: {message}{hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from dlc_ledger.cli.tables import escape_controls  # messages quote names from events
        from ledger.errors import Unavailable

        refusal = _refusal(exc)
        if refusal is None:
            return _bug(exc)
        print(f"dlc-ledger: error: {escape_controls(_one_line(refusal))}", file=sys.stderr)
        return EXIT_UNAVAILABLE if isinstance(refusal, Unavailable) else EXIT_REFUSED
    return code if isinstance(code, int) else 0


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main())
