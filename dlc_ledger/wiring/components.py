"""The service's long-running parts as :class:`~dlc_ledger.wiring.supervisor.Component`\\ s.

Each wraps the runner its own command uses (``project --follow``: ``Projector.run_forever``;
``billing serve``: :func:`consumers.billing_scheduler.serve`; ``dispatch --follow``:
``run_dispatcher``; ``ingest``: ``run_ingest``; ``watch``: ``Watcher``; ``api serve``:
uvicorn on ``app_from_environment``; ``replay``: the :class:`~dlc_ledger.wiring.replay.
pipeline.Pipeline`), so ``dlc-ledger up`` runs the same loops, only side by side. Each part
opens its own store (its own connection pool): the API alone may hold tens of connections.
The URL each is given names its role's login and the part itself (``application_name``;
:func:`dlc_ledger.wiring.context.component_url`); the API finds its own
(:func:`dlc_ledger.wiring.context.open_api_store`).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from dlc_ledger.wiring import context
from dlc_ledger.wiring.supervisor import Component
from kubesim import KubeSim
from kubesim.driver import Speed
from kubesim.traces import Trace
from ledger.errors import Unavailable
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "ReplayParts",
    "api_component",
    "billing_component",
    "dispatcher_component",
    "ingest_component",
    "notifications_component",
    "projector_component",
    "replay_component",
    "watcher_component",
]

log = logging.getLogger(__name__)

#: the factory ``api serve`` gives uvicorn, named by string as there (CLI and API are
#: independent layers; this one only names it)
API_FACTORY = "dlc_ledger.api.app:app_from_environment"


class ReplayParts:
    """What the replay component exposes once ready: kubesim (its URL and clock)."""

    sim: KubeSim | None = None


def replay_component(
    trace: Trace,
    store_url: str,
    bootstrap: str,
    topic: str,
    partitions: int,
    data_dir: Path,
    speed: Speed,
    cluster: str,
    say: Callable[[str], None],
    parts: ReplayParts,
) -> Component:
    """kubesim playing ``trace`` at ``speed``, the watcher on it, the producer and the
    ingest consumer: the replay's :class:`Pipeline`, left running. After the trace's end
    kubesim keeps serving what it holds (as ``python -m kubesim`` does)."""
    from dlc_ledger.wiring.replay.pipeline import Pipeline, PipelineSite, trace_driver

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        failed: list[BaseException] = []
        try:
            site = PipelineSite(store, bootstrap, topic, partitions, data_dir, cluster)
            # no progress lines and no deadline: the service runs quietly until stopped
            with Pipeline(trace, site, trace_driver(trace, speed), say=say) as pipeline:
                assert pipeline.driver is not None and pipeline.ingest is not None
                driver, ingest = pipeline.driver, pipeline.ingest

                def drive() -> None:
                    try:
                        driver.run()
                    except BaseException as exc:  # surfaced below, naming the part
                        failed.append(exc)

                threading.Thread(target=drive, name="up-kubesim-driver", daemon=True).start()
                parts.sim = pipeline.sim
                ready.set()
                played = False
                while not stop.wait(1.0):
                    if ingest.error is not None:
                        raise Unavailable(f"ingest consumer: {ingest.error}") from ingest.error
                    if failed:
                        raise Unavailable(f"kubesim trace driver: {failed[0]}") from failed[0]
                    pipeline.publisher.drain(force=False)  # what a broker outage spooled
                    if driver.finished and not played:
                        played = True
                        say(
                            f"trace {trace.name} played to its end at cluster time "
                            f"{pipeline.sim.clock.timestamp()}; kubesim keeps serving it"
                        )
        finally:
            store.close()

    return Component("kubesim, watcher and ingest", run)


def watcher_component(
    configuration: client.Configuration,
    store_url: str,
    bootstrap: str,
    topic: str,
    cluster: str,
    data_dir: Path,
    kafka_options: dict[str, Any],
) -> Component:
    """The watchers on a real cluster, publishing to ``topic`` (``dlc-ledger watch``)."""
    from consumers.producer import EventPublisher
    from consumers.watchers.runner import Watcher

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        publisher = EventPublisher(
            bootstrap, data_dir=data_dir / "watcher" / cluster, topic=topic, **kafka_options
        )
        watcher = Watcher(configuration, publisher.publish, cluster=cluster, store=store)
        try:
            watcher.start()
            if not watcher.wait_synced(60):
                raise Unavailable(
                    f"the watchers did not finish their first LIST of {configuration.host} "
                    "within 60 s"
                )
            ready.set()
            while not stop.wait(5.0):
                publisher.drain(force=False)
        finally:
            watcher.stop()
            publisher.close()
            store.close()

    return Component("watcher", run)


def ingest_component(
    store_url: str, bootstrap: str, topic: str, kafka_options: dict[str, Any]
) -> Component:
    """The ingest consumer in its consumer group (``dlc-ledger ingest``)."""
    from consumers.ingest import run_ingest
    from consumers.kafka_settings import DEFAULT_GROUP

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        ready.set()
        try:
            run_ingest(store, bootstrap, topic, DEFAULT_GROUP, stop, **kafka_options)
        finally:
            store.close()

    return Component("ingest", run)


def projector_component(store_url: str, poll_interval: float = 1.0) -> Component:
    """Every projection caught up, then followed (``dlc-ledger project --follow``)."""
    from consumers.projector import Projector
    from projections.registry import all_projections

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        try:
            projector = Projector(store, all_projections())
            projector.catch_up()
            ready.set()
            projector.run_forever(stop, poll_interval=poll_interval)
        finally:
            store.close()

    return Component("projector", run)


def billing_component(
    store_url: str,
    interval: timedelta,
    clock: Callable[[PostgresEventStore], datetime] | None,
) -> Component:
    """The rater and period close on a schedule (``dlc-ledger billing serve``); ``clock``
    (given the store) says "now", default the wall clock."""
    from consumers.billing_scheduler import serve

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        now = None if clock is None else (lambda: clock(store))
        ready.set()
        try:
            serve(store, stop, interval=interval, clock=now)
        finally:
            store.close()

    return Component("billing", run)


def notifications_component(
    store_url: str, clock: Callable[[PostgresEventStore], datetime] | None
) -> Component:
    """The event centre's matcher and sender (``dlc-ledger notifications send``); ``clock``
    (given the store) is the cluster's "now" for time-based rules, default the wall clock."""
    from consumers.notifications import serve
    from ledger.notifications import AllowList

    allow = AllowList.parse(context.settings().webhook_allow)

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        cluster = (lambda: datetime.now(UTC)) if clock is None else (lambda: clock(store))
        ready.set()
        try:
            serve(store, stop, cluster, allow=allow)
        finally:
            store.close()

    return Component("notifications", run)


def dispatcher_component(
    store_url: str,
    configuration: Callable[[], client.Configuration],
    clock: Callable[[], Callable[[], datetime]] | None,
    interval: float,
) -> Component:
    """The live dispatcher, following (``dlc-ledger dispatch --follow --no-project``: the
    projector beside it keeps its read models current). ``configuration`` and ``clock``
    are resolved when it starts: on kubesim both come from the replay component."""
    from consumers.dispatcher import Dispatcher, run_dispatcher
    from consumers.dispatcher.kube_actuator import KubeActuator
    from processes.budgets import StoreBudgetGate

    def run(stop: threading.Event, ready: threading.Event) -> None:
        store = PostgresEventStore(store_url)
        api = client.ApiClient(configuration())
        try:
            if clock is None:
                dispatcher = Dispatcher(store, KubeActuator(api), budgets=StoreBudgetGate(store))
            else:
                dispatcher = Dispatcher(
                    store, KubeActuator(api), clock(), budgets=StoreBudgetGate(store)
                )
            ready.set()
            run_dispatcher(
                dispatcher,
                store,
                follow=True,
                interval=interval,
                stop=stop,
                on_cycle=lambda outcome: log.info("%s", outcome.summary()),
            )
        finally:
            api.close()  # type: ignore[no-untyped-call]
            store.close()

    return Component("dispatcher", run)


def api_component(listener: socket.socket) -> Component:
    """The API and dashboard under uvicorn on ``listener`` (bound by the caller, so
    ``--port 0`` has a known port before anything is printed)."""
    import uvicorn

    class _Server(uvicorn.Server):
        ready: threading.Event | None = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.ready is not None:
                self.ready.set()

    # uvicorn's own access log would repeat the API's, which names the principal
    server = _Server(uvicorn.Config(API_FACTORY, factory=True, access_log=False, log_config=None))

    def run(_stop: threading.Event, ready: threading.Event) -> None:
        server.ready = ready
        try:
            server.run(sockets=[listener])
        finally:
            listener.close()

    def halt() -> None:
        server.should_exit = True

    return Component("api", run, halt=halt)
