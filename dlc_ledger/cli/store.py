"""``dlc-ledger db …``, ``verify`` and ``dead-letters …``: the store from the command line.

``db upgrade`` / ``downgrade`` connect as the schema owner; the reads here (``db status``,
``verify``, ``dead-letters list|show``) as a reader's login, ``dead-letters retry|resolve``
as a writer's (docs/store.md, "Roles")."""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from dlc_ledger.cli.options import CursorOption, LimitOption, print_next_cursor
from dlc_ledger.cli.tables import render_table
from dlc_ledger.services.store import (
    DeadLetterNotFound,
    StillInvalid,
    find_dead_letter,
    resolve,
    retry_dead_letter,
)
from dlc_ledger.wiring import context
from dlc_ledger.wiring.embedded_postgres import stop_embedded
from ledger.errors import Invalid
from ledger.store.base import DeadLetter
from ledger.store.engines import masked_url
from projections.pages import decode_cursor, encode_cursor

__all__ = ["db_app", "dead_letters_app", "verify"]

db_app = typer.Typer(help="Database schema and connection.", no_args_is_help=True)
dead_letters_app = typer.Typer(
    help="Items a long-running part could not handle: quarantined, to retry or discard.",
    no_args_is_help=True,
)

_T = TypeVar("_T")


class DbRole(StrEnum):
    owner = "owner"
    reader = "reader"
    writer = "writer"


@db_app.command("upgrade")
def db_upgrade(revision: str = "heads") -> None:
    """Apply migrations up to REVISION (default: the newest); creates the embedded
    database if there is none yet."""
    typer.echo(f"database at revision {context.migrate(revision)}")


@db_app.command("downgrade")
def db_downgrade(
    revision: str,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: downgrading drops data.")] = False,
) -> None:
    """Revert migrations down to REVISION ('base' removes every table)."""
    if not yes:
        raise typer.BadParameter("downgrade drops tables and their data: add --yes to confirm")
    typer.echo(f"database at revision {context.migrate(revision, down=True) or 'base'}")


@db_app.command("url")
def db_url(
    show_password: Annotated[
        bool,
        typer.Option("--show-password", help="Print the password too (default: masked, ***)."),
    ] = False,
    role: Annotated[
        DbRole,
        typer.Option(
            "--role",
            help="Whose: the schema owner's (migrations), or the reader's (the API, reports) "
            "or writer's login (the services).",
        ),
    ] = DbRole.owner,
) -> None:
    """Print the database URL in use (DATABASE_URL, or the embedded server's; with --role,
    DATABASE_URL_READER / _WRITER or the embedded server's logins)."""
    url = context.database_url(announce=False, role=role.value)
    typer.echo(url if show_password else masked_url(url))


@db_app.command("status")
def db_status() -> None:
    """Schema revision (per migration branch) and the store's head position."""
    store = context.open_store(check=False, role="reader")
    revision, branches = context.schema_revision(store)
    if not revision:
        typer.echo("revision: none (run: dlc-ledger db upgrade)")
        return
    behind = [b for b in branches if not b.up_to_date]
    state = "up to date" if not behind else f"{len(behind)} behind (run: dlc-ledger db upgrade)"
    typer.echo(
        f"revision: {revision} (the heads of {len(branches)} independent migration branches, "
        f"one per part of the schema; {state})"
    )
    width = max(len(b.label) for b in branches)
    for b in branches:
        mark = "up to date" if b.up_to_date else f"behind: newest {b.newest}"
        typer.echo(f"  {b.label:<{width}}  {b.applied or 'not applied'}  {mark}")
    typer.echo(f"events: {store.head_position()}")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL of DLC_DATA_DIR (the demo leaves it running); its data
    stays, and the next command that needs it starts it again."""
    cfg = context.settings()
    if cfg.database_url:
        raise Invalid("DATABASE_URL is set: that server is not the embedded one to stop")
    stopped = stop_embedded(cfg.data_dir)
    where = cfg.data_dir / "postgres"
    typer.echo(f"stopped the embedded PostgreSQL under {where}" if stopped else "not running")


def verify(
    batch: Annotated[int, typer.Option(min=1, help="Rows read per query.")] = 10_000,
    metrics_file: Annotated[
        Path | None,
        typer.Option(help="Also write the result as Prometheus gauges (textfile collector)."),
    ] = None,
) -> None:
    """Recompute the hash chain; exit 0 if intact, 1 naming the first broken position."""
    store = context.open_store(role="reader")
    result = store.verify(batch=batch)
    if metrics_file is not None:
        from consumers.verify_metrics import write_verification

        write_verification(metrics_file, ok=result.ok, checked=result.checked)
    if result.ok:
        typer.echo(f"chain intact: {result.checked} events verified")
        return
    typer.echo(
        f"chain broken at position {result.broken_at}: {result.detail} "
        f"({result.checked} events verified before it)",
        err=True,
    )
    raise typer.Exit(1)


def _letter_row(letter: DeadLetter) -> dict[str, object]:
    return {
        "id": letter.id,
        "reason": letter.reason,
        "source": letter.source,
        "where": f"{letter.topic}:{letter.partition}@{letter.offset}" if letter.topic else "-",
        "count": letter.count,
        "last_seen": letter.last_seen.isoformat(),
        "resolved": letter.resolved_at is not None,
        "error": letter.error,
    }


@dead_letters_app.command("list")
def dead_letters_list(
    all_: Annotated[bool, typer.Option("--all", help="Include resolved ones.")] = False,
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Dead letters, oldest first, a page at a time (the next page's cursor goes to stderr)."""
    after = 0
    if cursor is not None:
        (after,) = decode_cursor(cursor, int)
    # one more than the page: whether another page follows, without counting them all
    letters = context.open_store(role="reader").dead_letters(
        include_resolved=all_, after_id=after, limit=limit + 1
    )
    rows = [_letter_row(d) for d in letters[:limit]]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    elif not rows:
        typer.echo("no dead letters")
    else:
        columns = ["id", "reason", "count", "where", "last_seen", "resolved", "error"]
        short = [{**r, "error": str(r["error"])[:80]} for r in rows]
        typer.echo(render_table(short, columns))
    if len(letters) > limit:
        print_next_cursor(encode_cursor([letters[limit - 1].id]))


def _usage_error_if_missing(call: Callable[[], _T]) -> _T:
    """A letter id that names none is a usage error (exit 2), as a bad argument is."""
    try:
        return call()
    except DeadLetterNotFound as exc:
        raise typer.BadParameter(str(exc)) from None


@dead_letters_app.command("show")
def dead_letters_show(letter_id: int) -> None:
    """One dead letter with its raw payload."""
    store = context.open_store(role="reader")
    letter = _usage_error_if_missing(lambda: find_dead_letter(store, letter_id))
    row = _letter_row(letter)
    row["first_seen"] = letter.first_seen.isoformat()
    row["payload"] = letter.payload.decode("utf-8", errors="replace")
    typer.echo(json.dumps(row, indent=2))


@dead_letters_app.command("retry")
def dead_letters_retry(letter_id: int) -> None:
    """Requeue: validate a message again (say, after an upgrade taught us its type) and
    store it; rebuild the projection whose fold raised on an event; or resolve a letter
    whose part looks at its item again by itself (next tick, cycle or relist)."""
    store = context.open_store()
    try:
        done = _usage_error_if_missing(lambda: retry_dead_letter(store, letter_id))
    except StillInvalid as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    if done.action == "requeued":
        typer.echo(f"dead letter {letter_id}: marked resolved; its item is tried again next run")
    elif done.action == "refolded":
        if done.still_failing:
            typer.echo(
                f"dead letter {letter_id}: projection rebuilt, event {done.event_id} still "
                "fails and is skipped again (letter reopened)",
                err=True,
            )
            raise typer.Exit(1)
        typer.echo(f"dead letter {letter_id}: projection rebuilt, event {done.event_id} folded")
    else:
        stored = "stored" if done.stored else "already stored"
        typer.echo(f"dead letter {letter_id}: event {done.event_id} {stored}; marked resolved")


@dead_letters_app.command("resolve")
def dead_letters_resolve(letter_id: int) -> None:
    """Discard: mark the letter resolved, store nothing (the item seen again reopens it)."""
    store = context.open_store()
    letter = _usage_error_if_missing(lambda: resolve(store, letter_id))
    typer.echo(f"dead letter {letter_id} ({letter.source}, {letter.reason}): marked resolved")
