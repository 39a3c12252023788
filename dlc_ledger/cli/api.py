"""``dlc-ledger api serve``: the HTTP API under uvicorn, on the configured database.

The factory is named by string: the CLI and the API are independent layers, neither
imports the other (import-linter). One access-log line per request goes to stderr.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from dlc_ledger.wiring.logs import configure_logging

__all__ = ["api_app"]

api_app = typer.Typer(help="The HTTP API: serve it.", no_args_is_help=True)

_FACTORY = "dlc_ledger.api.app:app_from_environment"


@api_app.command("serve")
def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8000,
) -> None:
    """Serve the /v1 API (bearer tokens from `dlc-ledger tokens create`) until Ctrl-C.

    With DLC_OIDC_ISSUER, DLC_OIDC_AUDIENCE and DLC_OIDC_JWKS set, OIDC JWTs too (docs/api.md).
    """
    import uvicorn

    configure_logging(logging.INFO, "%(asctime)s %(levelname)s %(name)s %(message)s")
    # uvicorn's own access log would repeat ours without the principal
    uvicorn.run(_FACTORY, factory=True, host=host, port=port, access_log=False, log_config=None)
