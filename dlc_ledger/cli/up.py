"""``dlc-ledger up``: the whole service in one command, until Ctrl-C.

Options in, the URLs and the admin token out; the composition is
:mod:`dlc_ledger.wiring.up` (what runs, in which order, how a failure stops it).
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.cli.replay import TraceFormat, parse_speed, trace_format
from dlc_ledger.wiring.logs import configure_logging
from dlc_ledger.wiring.signals import stop_on_signals
from dlc_ledger.wiring.up import Running, UpPlan, run_up

__all__ = ["up"]


def _print_ready(running: Running) -> None:
    for line in running.lines():
        typer.echo(line)
    # a script (or a test) reads the URL and token as soon as they are printed
    sys.stdout.flush()


def up(
    host: Annotated[str, typer.Option(help="Interface the API and dashboard listen on.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Their TCP port; 0 picks a free one.")
    ] = 8000,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay/--no-replay",
            help="Without a kubeconfig: replay a trace on kubesim (--no-replay: serve the "
            "data already stored, e.g. by `dlc-ledger demo`).",
        ),
    ] = True,
    trace: Annotated[
        str | None,
        typer.Option(
            help="Trace CSV file, or 'openb' / 'dlrm' / 'openb+dlrm' for the bundled traces"
            " [openb]."
        ),
    ] = None,
    fmt: Annotated[
        TraceFormat | None,
        typer.Option("--format", help="Trace format (default: the bundled trace's own)."),
    ] = None,
    speed: Annotated[
        str | None, typer.Option(help="Cluster seconds per wall second, or 'max' [3600].")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N trace rows (pods).")
    ] = None,
    quotas: Annotated[
        Path | None,
        typer.Option(
            help="Replay: the quota tree applied at the trace's start (default: the demo's)."
        ),
    ] = None,
    pricebook: Annotated[
        Path | None,
        typer.Option(
            help="Replay: the price book published at the trace's start (default: the demo's)."
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            envvar="KUBECONFIG", help="Watch this cluster instead of replaying on kubesim."
        ),
    ] = None,
    kube_context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context.")
    ] = None,
    dispatch: Annotated[
        bool | None,
        typer.Option(
            "--dispatch/--no-dispatch",
            help="Run the dispatcher (default: on with kubesim; on a real cluster it acts on "
            "that cluster, so only when asked).",
        ),
    ] = None,
    dispatch_interval: Annotated[
        float, typer.Option(min=0.05, help="Seconds between dispatcher cycles.")
    ] = 10.0,
    billing_interval: Annotated[
        float, typer.Option(min=0.05, help="Seconds between billing ticks.")
    ] = 60.0,
    keep_services: Annotated[
        bool,
        typer.Option(
            "--keep-services",
            help="Leave the embedded PostgreSQL and broker running when up stops, if up "
            "started them (by default what up starts it stops; ones already running are "
            "always left running).",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Log every component's progress (INFO).")
    ] = False,
) -> None:
    """Run every component (database, broker, cluster or kubesim, watcher, ingest,
    projector, billing, dispatcher, API and dashboard) and print the dashboard's URL and
    an admin token; Ctrl-C stops them all."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise typer.BadParameter(f"{kubeconfig} is not a file", param_hint="--kubeconfig")
    _replay_only(
        replay and kubeconfig is None,
        {"--trace": trace, "--format": fmt, "--speed": speed, "--limit": limit,
         "--quotas": quotas, "--pricebook": pricebook},
    )  # fmt: skip
    trace = trace or "openb"
    configure_logging(
        logging.INFO if verbose else logging.WARNING,
        "%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # one line per request, naming the principal, as `api serve` logs it
    logging.getLogger("dlc_ledger.api.access").setLevel(logging.INFO)
    plan = UpPlan(
        host=host,
        port=port,
        replay=replay,
        trace=trace,
        fmt=trace_format(trace, fmt).value,
        speed=parse_speed(speed or "3600"),  # type: ignore[arg-type]
        limit=limit,
        quotas=quotas,
        pricebook=pricebook,
        kubeconfig=kubeconfig,
        kube_context=kube_context,
        dispatch=dispatch,
        dispatch_interval=dispatch_interval,
        billing_interval=billing_interval,
        keep_services=keep_services,
    )
    stop = threading.Event()
    stop_on_signals(stop, second_exits=True)
    run_up(plan, stop, _print_ready)
    typer.echo("dlc-ledger up: stopped")


def _replay_only(on_kubesim: bool, given: dict[str, object]) -> None:
    """A replay's option given where nothing is replayed is a usage error, not ignored."""
    if on_kubesim:
        return
    for option, value in given.items():
        if value is not None:
            raise typer.BadParameter(
                "applies only to a replay on kubesim (not with --no-replay or a kubeconfig)",
                param_hint=option,
            )
