"""``dlc-ledger export`` and ``dlc-ledger import``: the event store to files and back.

The export reads as a reader's login (it only reads, in one snapshot); the import connects
as the schema owner, as ``db upgrade`` does: a restore is a deploy step, it may have to create
the schema of a new database first, and after the load it gathers the table's statistics,
which only the owner may. The use cases: :mod:`dlc_ledger.services.store` (export,
restore); the restore drill: ``docs/operations.md``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.services.store import (
    DEFAULT_PER_FILE,
    Part,
    export_store,
    import_store,
    open_export,
)
from dlc_ledger.wiring import context

__all__ = ["export", "import_"]


def export(
    to: Annotated[
        Path,
        typer.Option(
            "--to",
            metavar="DIR",
            help="A new or empty directory for the export's files and its manifest.json.",
        ),
    ],
    per_file: Annotated[
        int, typer.Option("--per-file", min=1, help="Events per compressed JSONL file.")
    ] = DEFAULT_PER_FILE,
) -> None:
    """Write the event store, every column of every event in position order, as gzip JSONL
    files with their hash-chain anchors and a manifest (one consistent snapshot)."""
    store = context.open_store(role="reader")
    started = time.perf_counter()
    manifest = export_store(store, to, per_file=per_file, on_part=_PartNote("wrote"))
    took = time.perf_counter() - started
    typer.echo(
        f"exported {manifest.events:,} events in {len(manifest.parts)} files to {to} "
        f"in {took:.1f} s; head: position {manifest.head.position}, hash "
        f"{manifest.head.hash.hex()}"
    )


def import_(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="The directory dlc-ledger export wrote.")
    ],
) -> None:
    """Restore an export into an empty database, checking its manifest and hash chain while
    loading; nothing is kept unless every event is."""
    manifest = open_export(directory)  # a bad export is refused before any database is touched
    store = context.open_store(check=False, create=True, role="owner")
    revision, _ = context.schema_revision(store)
    if revision is None:  # a new database: its schema first, as db upgrade makes it
        typer.echo(f"no schema: migrated to {context.migrate('heads')}", err=True)
    else:
        context.ready_schema(store.engine)
    started = time.perf_counter()
    restored = import_store(store, directory, manifest=manifest, on_part=_PartNote("checked"))
    took = time.perf_counter() - started
    typer.echo(
        f"imported {restored.events:,} events from {restored.parts} files in {took:.1f} s; "
        f"chain verified to position {restored.head.position}, hash {restored.head.hash.hex()}"
    )
    typer.echo(
        "next: dlc-ledger project (builds the read models from the restored events)", err=True
    )


class _PartNote:
    """One line on stderr per part, as the export or the import finishes it."""

    def __init__(self, verb: str) -> None:
        self.verb = verb

    def __call__(self, part: Part) -> None:
        typer.echo(
            f"{part.name}: {self.verb} positions {part.first_position:,}-"
            f"{part.last_position:,} ({part.events:,} events)",
            err=True,
        )
