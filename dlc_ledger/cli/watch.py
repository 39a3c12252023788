"""``dlc-ledger watch``: run the Kubernetes watchers until SIGTERM.

Connects with a kubeconfig (or the in-cluster service account, or a plain ``--server`` URL
such as a kubesim), publishes through the spooling Kafka producer and keeps its resume point
in PostgreSQL, so a restart continues where it stopped without publishing anything twice.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Annotated

import typer

from consumers.watchers.listwatch import DEFAULT_RESOURCES, WatchSettings, resource_named
from consumers.watchers.runner import Watcher
from dlc_ledger.wiring.kube import kube_configuration
from dlc_ledger.wiring.logs import configure_logging

__all__ = ["watch"]

log = logging.getLogger(__name__)

_ALL = ",".join(res.name for res in DEFAULT_RESOURCES)


def watch(
    server: Annotated[
        str | None, typer.Option(help="API server URL (e.g. a kubesim); skips kubeconfig.")
    ] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig file.")] = None,
    kube_context: Annotated[
        str | None, typer.Option("--context", help="kubeconfig context.")
    ] = None,
    cluster: Annotated[
        str, typer.Option(help="Cluster name in event ids and sources.")
    ] = "default",
    resources: Annotated[str, typer.Option(help="Comma-separated resource types to watch.")] = _ALL,
    label_selector: Annotated[
        str | None, typer.Option(help="Only objects matching this label selector.")
    ] = None,
    resync_seconds: Annotated[float, typer.Option(help="Periodic relist (drift repair).")] = 600.0,
    buffer: Annotated[int, typer.Option(help="Events buffered before back-pressure.")] = 50_000,
    metrics_port: Annotated[
        int, typer.Option(help="Serve Prometheus /metrics on this port, 0 = off.")
    ] = 0,
) -> None:
    """Watch the cluster and publish its facts to Kafka until SIGTERM / Ctrl-C."""
    from consumers.metrics import serve_metrics
    from consumers.producer import EventPublisher
    from dlc_ledger.wiring import context
    from dlc_ledger.wiring.signals import stop_on_signals

    configure_logging(logging.INFO, "%(asctime)s %(levelname)s %(name)s %(message)s")
    configuration = kube_configuration(server, kubeconfig, kube_context)
    watched = [resource_named(name.strip()) for name in resources.split(",") if name.strip()]
    store = context.open_store(create=True)
    publisher = EventPublisher(
        context.kafka_bootstrap(),
        data_dir=context.settings().data_dir / "watcher" / cluster,
        topic=context.settings().topic,
        **context.settings().kafka_client_options(),  # SASL / TLS, passed through
    )
    stop = threading.Event()
    stop_on_signals(stop)
    watcher = Watcher(
        configuration,
        publisher.publish,
        cluster=cluster,
        store=store,
        resources=watched,
        settings=WatchSettings(label_selector=label_selector, resync_seconds=resync_seconds),
        buffer_events=buffer,
    )
    serve_metrics(metrics_port or context.settings().metrics_port)
    watcher.start()
    log.info("watching %s as cluster %r", configuration.host, cluster)
    try:
        while not stop.wait(30):
            publisher.drain(force=False)
            log.info("watcher: %s", watcher.stats)
    finally:
        watcher.stop()
        publisher.close()
        store.close()
