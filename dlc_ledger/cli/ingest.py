"""``dlc-ledger ingest``: run the ingest consumer (:mod:`consumers.ingest`) until SIGTERM."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Annotated

import typer

from consumers.ingest import run_ingest
from consumers.kafka_settings import DEFAULT_GROUP
from dlc_ledger.wiring.logs import configure_logging
from dlc_ledger.wiring.signals import stop_on_signals

__all__ = ["ingest_app", "ingest_command", "main"]

log = logging.getLogger(__name__)

ingest_app = typer.Typer(help="Consume Kafka into the event store (exactly-once effects).")


@ingest_app.callback(invoke_without_command=True)
def ingest_command(
    database_url: Annotated[
        str | None,
        typer.Option(help="PostgreSQL URL without a password (default: DATABASE_URL / embedded)."),
    ] = None,
    database_url_file: Annotated[
        Path | None, typer.Option(help="A file whose first line is the PostgreSQL URL.")
    ] = None,
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap (default: KAFKA_BOOTSTRAP / embedded).")
    ] = None,
    topic: Annotated[
        str | None, typer.Option(help="Topic to consume (default: DLC_TOPIC).")
    ] = None,
    group: Annotated[str, typer.Option(help="Consumer group.")] = DEFAULT_GROUP,
    partitions: Annotated[
        str | None, typer.Option(help="Comma-separated partitions: static assignment, no group.")
    ] = None,
    max_poll_records: Annotated[int, typer.Option(help="Messages per batch.")] = 2_000,
    session_timeout_ms: Annotated[int, typer.Option(help="Group session timeout.")] = 6_000,
    metrics_port: Annotated[int, typer.Option(help="Prometheus port, 0 = off.")] = 0,
    idle_exit: Annotated[
        float | None, typer.Option(help="Exit after this many idle seconds.")
    ] = None,
    max_messages: Annotated[int | None, typer.Option(help="Exit after this many messages.")] = None,
    stats_file: Annotated[
        Path | None, typer.Option(help="Write the final counters here as JSON.")
    ] = None,
) -> None:
    """Run the ingest consumer until SIGTERM."""
    configure_logging(logging.INFO, "%(asctime)s %(levelname)s %(name)s %(message)s")
    stop_event = threading.Event()
    stop_on_signals(stop_event)
    from dlc_ledger.wiring import context

    database_url = context.option_database_url(database_url, database_url_file)
    topic = topic or context.settings().topic
    if database_url is None or bootstrap is None:
        store_url = database_url or context.database_url(create=True)
        bootstrap = bootstrap or context.kafka_bootstrap()
        if metrics_port == 0:
            metrics_port = context.settings().metrics_port
    else:
        store_url = database_url
    store = context.open_store_at(store_url, create=database_url is None)
    try:
        stats = run_ingest(
            store,
            bootstrap,
            topic,
            group,
            stop_event,
            partitions=[int(p) for p in partitions.split(",")] if partitions else None,
            idle_timeout=idle_exit,
            max_messages=max_messages,
            metrics_port=metrics_port,
            max_poll_records=max_poll_records,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, session_timeout_ms // 6),
            **context.settings().kafka_client_options(),  # SASL / TLS, passed through
        )
    finally:
        store.close()
    summary = {
        "messages": stats.messages,
        "appended": stats.appended,
        "duplicates": stats.duplicates,
        "dead_letters": stats.dead_letters,
        "batches": stats.batches,
        "store_failures": stats.store_failures,
        "busy_seconds": round(stats.busy_seconds, 3),
    }
    if stats_file is not None:
        import json

        stats_file.write_text(json.dumps(summary))
    log.info("ingest stopped: %s", summary)


def main() -> None:
    """``python -m dlc_ledger.cli.ingest``."""
    ingest_app()


if __name__ == "__main__":
    main()
