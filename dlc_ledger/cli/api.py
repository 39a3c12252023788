"""``dlc-ledger api serve``: the HTTP API under uvicorn, on the configured database.

The factory is named by string: the CLI and the API are independent layers, neither
imports the other (import-linter). One access-log line per request goes to stderr.
Several worker processes by default (one per CPU): a worker spends 8-11 ms of CPU per
call, so one process caps the API at ~100 calls/s (bench/RESULTS.md, api).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from dlc_ledger.wiring.logs import SERVICE_LOG_FORMAT, configure_logging

__all__ = ["api_app"]

api_app = typer.Typer(help="The HTTP API: serve it.", no_args_is_help=True)

_FACTORY = "dlc_ledger.api.app:app_from_environment"
#: prometheus-client's multiprocess mode reads its directory from this variable
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


@api_app.command("serve")
def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Worker processes (default: the CPU count). /metrics sums them all.",
        ),
    ] = None,
) -> None:
    """Serve the /v1 API (bearer tokens from `dlc-ledger tokens create`) until Ctrl-C.

    With DLC_OIDC_ISSUER, DLC_OIDC_AUDIENCE and DLC_OIDC_JWKS set, OIDC JWTs too (docs/api.md).
    """
    import uvicorn

    configure_logging(logging.INFO, SERVICE_LOG_FORMAT)
    count = workers or os.cpu_count() or 1
    with _shared_metrics(count):
        # uvicorn's own access log would repeat ours without the principal
        uvicorn.run(
            _FACTORY,
            factory=True,
            host=host,
            port=port,
            workers=count,
            access_log=False,
            log_config=None,
        )


@contextmanager
def _shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, prometheus-client's multiprocess mode: each worker writes its
    figures to files in one directory, and whichever worker answers ``/metrics`` sums
    them (the variable must be set before a worker imports prometheus_client)."""
    if workers == 1 or os.environ.get(MULTIPROC_DIR):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="dlc-api-metrics-") as directory:
        os.environ[MULTIPROC_DIR] = directory
        try:
            yield
        finally:
            del os.environ[MULTIPROC_DIR]
