"""``dlc-ledger project`` and ``dlc-ledger projections …``: run, rebuild and watch read models.

``project`` catches every registered projection (or one, ``--name``) up to the
store's head, or with ``--follow`` keeps tailing until SIGINT/SIGTERM; each page
and its checkpoint commit together, so stopping at any moment is safe.
With ``--workers N`` the projections are split into up to N lanes, each caught up
(or followed) by its own process (:mod:`consumers.lanes`).
``projections rebuild`` empties a projection and replays it from position 0;
``projections status`` shows each one's position, the head and the lag. The use cases
are :mod:`dlc_ledger.wiring.projections`; signals, ``--follow`` and lanes (child
processes) belong to the process, so they stay here.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterator
from functools import partial
from types import FrameType
from typing import Annotated

import typer

from consumers.lanes import LaneFailed, catch_up_lanes, follow_lanes, plan_lanes
from consumers.metrics import serve_metrics
from consumers.projector import DEFAULT_PAGE, Projector
from dlc_ledger.cli.tables import render_table
from dlc_ledger.wiring import context
from dlc_ledger.wiring.projections import (
    Applied,
    catch_up,
    projection_status,
    select_projections,
    timed,
)
from dlc_ledger.wiring.projections import rebuild as rebuild_projections

__all__ = ["project", "projections_app"]

projections_app = typer.Typer(
    help="Read models: rebuild them, see how far behind they are.", no_args_is_help=True
)

NameOption = Annotated[
    str | None, typer.Option("--name", help="Only this projection (default: all registered).")
]
PageOption = Annotated[int, typer.Option("--page-size", min=1, help="Events per transaction.")]


def project(
    name: NameOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep tailing new events until SIGINT/SIGTERM.")
    ] = False,
    page_size: PageOption = DEFAULT_PAGE,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between polls when idle.")
    ] = 2.0,
    workers: Annotated[
        int,
        typer.Option("--workers", min=1, help="Processes to spread the projections over (lanes)."),
    ] = 1,
    metrics_port: Annotated[
        int,
        typer.Option(help="With --follow and one worker: serve Prometheus /metrics, 0 = off."),
    ] = 0,
) -> None:
    """Bring projections up to date with the event store (once, or live with --follow)."""
    if metrics_port and (workers > 1 or not follow):
        # lanes are child processes whose metrics this process cannot serve
        raise typer.BadParameter("needs --follow and --workers 1", param_hint="--metrics-port")
    store = context.open_store()
    if not follow and workers == 1:
        _print_caught_up(catch_up(store, name, page_size=page_size))
        return
    projector = Projector(store, select_projections(name), page_size=page_size)
    if workers > 1:
        _in_lanes(projector, follow, workers, poll_interval)
        return
    serve_metrics(metrics_port)
    # installed before the first page, so a signal at any moment ends cleanly
    with _stopped_by_signals() as stop:
        _print_caught_up(timed(projector.catch_up))
        typer.echo("following the store (Ctrl-C to stop)")
        projector.run_forever(stop, poll_interval=poll_interval)
    typer.echo("stopped; checkpoints are saved")


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[threading.Event]:
    """An event SIGINT/SIGTERM set while the block runs (the previous handlers come back)."""
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _in_lanes(projector: Projector, follow: bool, workers: int, poll_interval: float) -> None:
    open_store = context.store_opener(context.database_url(announce=False))
    lanes = plan_lanes(projector.projections, workers)
    typer.echo("lanes: " + "; ".join(", ".join(p.name for p in lane) for lane in lanes))
    settings = {"workers": workers, "page_size": projector.page_size}
    try:
        with _stopped_by_signals() as stop:
            if follow:
                typer.echo("following the store (Ctrl-C to stop)")
                follow_lanes(
                    open_store, projector.projections, stop, poll_interval=poll_interval, **settings
                )
            else:
                run = partial(
                    catch_up_lanes, open_store, projector.projections, stop=stop, **settings
                )
                _print_caught_up(timed(run))
    except LaneFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if follow or stop.is_set():
        typer.echo("stopped; checkpoints are saved")


def _print_caught_up(done: Applied) -> None:
    rate = f" ({done.per_second:,.0f} events/s)" if done.per_second else ""
    typer.echo(f"caught up: {done.events} events applied across projections{rate}", nl=True)


@projections_app.command("rebuild")
def rebuild(
    name: Annotated[
        str | None, typer.Argument(help="Projection to rebuild (default: every one).")
    ] = None,
    page_size: PageOption = DEFAULT_PAGE,
) -> None:
    """Empty a projection's tables, replay the whole store into it, then VACUUM (ANALYZE)
    them."""
    for done in rebuild_projections(context.open_store(), name, page_size=page_size):
        typer.echo(f"rebuilt {done.name}: {done.events} events in {done.seconds:.1f} s")


@projections_app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False,
) -> None:
    """Position, store head and lag of every registered projection."""
    rows = [
        {"name": s.name, "position": s.position, "head": s.head, "lag": s.lag}
        for s in projection_status(context.open_store())
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(render_table(rows))
