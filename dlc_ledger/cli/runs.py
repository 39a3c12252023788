"""``dlc-ledger runs``: the replay runs beside the configured database, and the one in use.

The demo leaves two: ``open-loop`` (the configured database: the exact replay, the bills)
and ``closed-loop`` (the dispatcher's run, which commands read by default afterwards);
``demo --what-if`` adds ``what-if-<policy>`` runs (:mod:`dlc_ledger.wiring.runs`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dlc_ledger.cli.tables import FormatOption, RowFormat, emit_rows
from dlc_ledger.wiring import context
from dlc_ledger.wiring.runs import OPEN_LOOP, Runs

__all__ = ["runs_app"]

runs_app = typer.Typer(
    help="Replay runs (open-loop, closed-loop, what-if-<policy>): list, choose the default.",
    no_args_is_help=True,
)


def _runs() -> tuple[Runs, str]:
    base = context.base_database_url(announce=False)
    return Runs(context.settings().data_dir, base), base


@runs_app.command("list")
def list_runs(fmt: FormatOption = RowFormat.table) -> None:
    """The runs recorded for this database; `in_use` marks the one commands read."""
    runs, base = _runs()
    in_use = context.current_run(base) or OPEN_LOOP
    records = runs.records()
    rows = [
        {
            "run": name,
            "in_use": "*" if name == in_use else "",
            "description": records[name].description
            if name in records
            else "the configured database: the exact open-loop replay",
        }
        for name in [OPEN_LOOP, *sorted(set(records) - {OPEN_LOOP})]
    ]
    emit_rows(rows, fmt)


@runs_app.command("use")
def use_run(name: Annotated[str, typer.Argument(help="open-loop, closed-loop, ...")]) -> None:
    """Make NAME the run commands read when --run and DLC_RUN name none."""
    runs, _ = _runs()
    runs.set_default(name)
    typer.echo(f"commands now read run {name}")
