"""The API's app factory: routes, problem handlers and the access log on one store.

:func:`create_app` takes the store (tests pass theirs); :func:`app_from_environment` is
what ``dlc-ledger api serve`` gives uvicorn (the CLI cannot import this package: the
two are independent layers, so it names the factory by string).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable

from fastapi import Depends, FastAPI, Request, Response

from dlc_ledger.api import (
    books,
    chain,
    dispatch,
    events,
    extent,
    finance,
    inventory,
    invoices,
    jobs,
    notifications,
    quotas,
    reports,
    subscriptions,
    whoami,
)
from dlc_ledger.api.dashboard_mount import mount_dashboard
from dlc_ledger.api.freshness import freshness_headers, track_freshness
from dlc_ledger.api.guards import reject_nul_characters
from dlc_ledger.api.metrics import metrics_app, observe
from dlc_ledger.api.problems import install_problem_handlers
from dlc_ledger.services.oidc import OidcVerifier
from dlc_ledger.wiring import context
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "ACCESS_LOG",
    "app_from_environment",
    "create_app",
    "openapi_document",
    "printable",
]

ACCESS_LOG = logging.getLogger("dlc_ledger.api.access")
VERSION = "1"


def create_app(
    store: PostgresEventStore | None,
    oidc: OidcVerifier | None = None,
    *,
    run_label: str | None = None,
) -> FastAPI:
    """The app reading ``store`` (None: no requests, only its OpenAPI document); ``oidc``
    verifies OIDC bearer JWTs (None: only the ledger's own tokens are accepted);
    ``run_label`` names the run it serves (``/v1/extent``'s ``run``)."""
    app = FastAPI(
        title="DLC Ledger API",
        version=VERSION,
        description=(
            "API over the ledger's projections and store: reads, and subscription orders "
            "(docs/api.md)."
        ),
        dependencies=[Depends(reject_nul_characters), Depends(track_freshness)],
    )
    app.state.store = store
    app.state.oidc = oidc
    app.state.run_label = run_label
    install_problem_handlers(app)
    app.include_router(whoami.router)
    app.include_router(jobs.router)
    app.include_router(events.router)
    app.include_router(reports.router)
    app.include_router(finance.router)
    app.include_router(extent.router)
    app.include_router(quotas.router)
    app.include_router(dispatch.router)
    app.include_router(invoices.router)
    app.include_router(inventory.router)
    app.include_router(chain.router)
    app.include_router(books.router)
    app.include_router(subscriptions.router)
    app.include_router(notifications.router)
    app.mount("/metrics", metrics_app())
    mount_dashboard(app)

    @app.middleware("http")
    async def access_log(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            freshness_headers(request, response)
            if "authorization" in request.headers:
                # an answer for one bearer: no shared or browser cache keeps it
                response.headers.setdefault("Cache-Control", "no-store")
            if request.url.path.startswith("/v1/"):
                response.headers.setdefault("Vary", "Accept")  # JSON or CSV by Accept
            return response
        finally:
            elapsed = time.perf_counter() - started
            observe(request, status, elapsed)
            principal = getattr(request.state, "principal", None)
            who = f"{principal.name}({principal.token_id})" if principal else "-"
            ACCESS_LOG.info(
                "%s %s %s %d %.1fms",
                printable(who),
                printable(request.method),
                printable(request.url.path),
                status,
                elapsed * 1000,
            )

    return app


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``): a URL holding terminal escape
    sequences must not drive the operator's console through the log."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def app_from_environment() -> FastAPI:
    """The app on the configured database (``DATABASE_URL``, else the embedded one), with
    OIDC JWTs accepted when ``DLC_OIDC_*`` are set."""
    oidc = context.settings().oidc()
    verifier = None if oidc is None else OidcVerifier(oidc)  # a bad JWKS file fails here
    base = context.base_database_url(announce=False)
    return create_app(context.open_store(), verifier, run_label=context.run_label(base))


def openapi_document() -> str:
    """The OpenAPI document as committed in docs/openapi.json (stable key order)."""
    return json.dumps(create_app(None).openapi(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m dlc_ledger.api.app > docs/openapi.json
    sys.stdout.write(openapi_document())
