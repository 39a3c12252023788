"""``dlc-ledger broker start|stop|status``: the embedded Tansu broker from the command line.

A Typer sub-app the composition root mounts; it only parses options and prints,
the work is in :mod:`dlc_ledger.wiring.broker`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dlc_ledger.wiring import context
from dlc_ledger.wiring.broker import BrokerError, EmbeddedBroker

__all__ = ["broker_app", "default_data_dir"]

broker_app = typer.Typer(
    help="Run the embedded Kafka-compatible broker (Tansu).", no_args_is_help=True
)


def default_data_dir() -> Path:
    """The configured data dir (``DLC_DATA_DIR``, the ``DLC_CONFIG`` file, else the user's
    data dir): the one the demo's and replay's broker lives in, so ``stop`` finds it."""
    return context.settings().data_dir


DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where the broker's state and log live (DLC_DATA_DIR)."),
]


def _broker(
    data_dir: Path | None,
    port: int = 0,
    topic: str | None = None,
    partitions: int | None = None,
) -> EmbeddedBroker:
    cfg = context.settings()  # DLC_TOPIC / DLC_PARTITIONS, as every command reads them
    return EmbeddedBroker(
        (data_dir or default_data_dir()) / "broker",
        port=port,
        topic=topic or cfg.topic,
        partitions=partitions or cfg.partitions,
    )


@broker_app.command("start")
def start(
    data_dir: DataDir = None,
    port: Annotated[int, typer.Option(help="Loopback port; 0 picks a free one.")] = 0,
    topic: Annotated[
        str | None, typer.Option(help="Topic created if missing (default: DLC_TOPIC).")
    ] = None,
    partitions: Annotated[
        int | None,
        typer.Option(min=1, help="Partitions of a new topic (default: DLC_PARTITIONS)."),
    ] = None,
) -> None:
    """Start Tansu (or report the one already running) and print its bootstrap address."""
    try:
        status = _broker(data_dir, port, topic, partitions).start()
    except BrokerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps(status.as_dict()))


@broker_app.command("stop")
def stop(data_dir: DataDir = None) -> None:
    """Stop the embedded broker of this data dir."""
    stopped = _broker(data_dir).stop()
    typer.echo("stopped" if stopped else "not running")


@broker_app.command("status")
def status(data_dir: DataDir = None) -> None:
    """Print the broker's state as JSON; exit code 3 when it is not running."""
    current = _broker(data_dir).status()
    typer.echo(json.dumps(current.as_dict()))
    if not current.running:
        raise typer.Exit(3)
