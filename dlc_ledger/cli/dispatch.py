"""``dlc-ledger dispatch [--follow]``: the live dispatcher, wired to the cluster.

Each cycle catches up the read models it reads (unless ``--no-project``), decides from
projected state, stores the decisions and then acts on the cluster through the official
client (kubeconfig, in-cluster, or a ``--server`` URL such as a kubesim, as ``watch``
connects). One line per cycle on stdout. Exactly one instance acts: the others wait for
the dispatcher lease (``consumers/dispatcher/runner.py``); SIGTERM / Ctrl-C stop after
the cycle in hand and release it.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.wiring.logs import configure_logging

__all__ = ["dispatch"]

log = logging.getLogger(__name__)


def dispatch(
    follow: Annotated[
        bool, typer.Option("--follow", help="Cycle until SIGTERM / Ctrl-C (else: one cycle).")
    ] = False,
    interval: Annotated[
        float, typer.Option(min=0.05, help="Seconds between cycles with --follow.")
    ] = 10.0,
    project: Annotated[
        bool,
        typer.Option(
            "--project/--no-project",
            help="Catch up the read models it reads (jobs, quotas, decisions) before each "
            "cycle; --no-project when a projector runs beside it.",
        ),
    ] = True,
    server: Annotated[
        str | None, typer.Option(help="API server URL (e.g. a kubesim); skips kubeconfig.")
    ] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig file.")] = None,
    kube_context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context.")
    ] = None,
    metrics_port: Annotated[
        int, typer.Option(help="Serve Prometheus /metrics on this port, 0 = off.")
    ] = 0,
    clock: Annotated[
        str,
        typer.Option(
            help="'wall': decide at this host's time; 'server': at the API server's (its "
            "Date header, e.g. a kubesim replaying a trace), cycling once per instant it "
            "shows (again only after a cycle with failures).",
        ),
    ] = "wall",
) -> None:
    """Admit, preempt and resume jobs from projected state (Kueue semantics); decisions are
    stored as events first, then acted on."""
    from kubernetes import client

    from consumers.dispatcher import CycleOutcome, Dispatcher, LeaseBusy, run_dispatcher
    from consumers.dispatcher.clocks import api_server_clock
    from consumers.dispatcher.kube_actuator import KubeActuator
    from consumers.metrics import serve_metrics
    from consumers.projector import catch_up_if_behind
    from dlc_ledger.wiring import context
    from dlc_ledger.wiring.kube import kube_configuration
    from dlc_ledger.wiring.signals import stop_on_signals
    from processes.budgets import StoreBudgetGate
    from projections.budgets import BudgetsProjection
    from projections.dispatch import DispatchDecisionsProjection
    from projections.jobs import JobsProjection
    from projections.quotas import QuotaProjection

    if clock not in ("wall", "server"):
        raise typer.BadParameter("must be 'wall' or 'server'", param_hint="--clock")
    configure_logging(logging.INFO, "%(asctime)s %(levelname)s %(name)s %(message)s")
    configuration = kube_configuration(server, kubeconfig, kube_context)
    store = context.open_store()
    api = client.ApiClient(configuration)
    reads = [
        JobsProjection(),
        QuotaProjection(),
        DispatchDecisionsProjection(),
        BudgetsProjection(),
    ]
    dispatcher = Dispatcher(
        store,
        KubeActuator(api),
        *([api_server_clock(api)] if clock == "server" else []),
        refresh=(lambda: catch_up_if_behind(store, reads)) if project else None,
        budgets=StoreBudgetGate(store),
    )
    stop = threading.Event()
    stop_on_signals(stop)

    def show(outcome: CycleOutcome) -> None:
        typer.echo(outcome.summary())
        sys.stdout.flush()

    if metrics_port == 0:
        metrics_port = context.settings().metrics_port
    serve_metrics(metrics_port)
    log.info("dispatching on %s", configuration.host)
    try:
        run_dispatcher(
            dispatcher,
            store,
            follow=follow,
            interval=interval,
            stop=stop,
            on_cycle=show,
            once_per_instant=clock == "server",
        )
    except LeaseBusy as exc:
        typer.echo(f"dlc-ledger: error: {exc}", err=True)
        raise typer.Exit(3) from None
    finally:
        api.close()  # type: ignore[no-untyped-call]
        store.close()
