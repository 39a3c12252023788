"""The API's app factory: routes, problem handlers and the access log on one store.

:func:`create_app` takes the store (tests pass theirs); :func:`app_from_environment` is
what ``dlc-ledger api serve`` gives uvicorn (the CLI cannot import this package: the
two are independent layers, so it names the factory by string).
"""

from __future__ import annotations

import json
import logging
import sys

from fastapi import Depends, FastAPI

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
    payments,
    periods,
    quotas,
    reports,
    subscriptions,
    whoami,
    workloads,
)
from dlc_ledger.api.access_log import ACCESS_LOG, AccessLog, printable
from dlc_ledger.api.api_docs import mount_api_docs
from dlc_ledger.api.dashboard_mount import mount_dashboard
from dlc_ledger.api.freshness import track_freshness
from dlc_ledger.api.guards import reject_nul_characters
from dlc_ledger.api.head_requests import HeadAsGet
from dlc_ledger.api.metrics import router as metrics_router
from dlc_ledger.api.problems import install_problem_handlers
from dlc_ledger.api.rate_limits import RateLimiter, rate_limiter
from dlc_ledger.services.access import OidcVerifier
from dlc_ledger.wiring import context
from dlc_ledger.wiring.logs import SERVICE_LOG_FORMAT, configure_logging
from ledger.notifications import AllowList
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "ACCESS_LOG",
    "app_from_environment",
    "create_app",
    "openapi_document",
    "printable",
]

VERSION = "1"


def create_app(
    store: PostgresEventStore | None,
    oidc: OidcVerifier | None = None,
    *,
    run_label: str | None = None,
    rate_limits: RateLimiter | None = None,
    public_url: str | None = None,
    api_docs: bool = False,
    webhook_allow: str | None = None,
) -> FastAPI:
    """The app reading ``store`` (None: no requests, only its OpenAPI document); ``oidc``
    verifies OIDC bearer JWTs (None: only the ledger's own tokens are accepted);
    ``run_label`` names the run it serves (``/v1/extent``'s ``run``); ``rate_limits``
    bounds each token's requests (None: no limit); ``public_url`` is where clients reach
    the API (``DLC_PUBLIC_URL``: the base of ``Link`` headers; None: relative links);
    ``api_docs`` serves the vendored Swagger UI at ``/docs`` (``DLC_API_DOCS``);
    ``webhook_allow`` is the operator's allow-list of webhook targets inside its network
    that rules may name (``DLC_WEBHOOK_ALLOW``, docs/notifications.md)."""
    app = FastAPI(
        title="DLC Ledger API",
        version=VERSION,
        description=(
            "API over the ledger's projections and store: reads, and subscription orders "
            "(docs/api.md)."
        ),
        dependencies=[Depends(reject_nul_characters), Depends(track_freshness)],
        docs_url=None,  # FastAPI's pages load code from a CDN; ``api_docs``: our own copy
        redoc_url=None,
    )
    app.state.store = store
    app.state.oidc = oidc
    app.state.run_label = run_label
    app.state.rate_limits = rate_limits
    app.state.public_url = public_url  # the base of Link headers (None: relative)
    # None: the sender's environment's (``DLC_WEBHOOK_ALLOW``), as the services read it
    app.state.webhook_allow = None if webhook_allow is None else AllowList.parse(webhook_allow)
    install_problem_handlers(app)
    app.include_router(whoami.router)
    app.include_router(jobs.router)
    app.include_router(workloads.router)
    app.include_router(events.router)
    app.include_router(reports.router)
    app.include_router(finance.router)
    app.include_router(extent.router)
    app.include_router(quotas.router)
    app.include_router(dispatch.router)
    app.include_router(invoices.router)
    app.include_router(payments.router)
    app.include_router(inventory.router)
    app.include_router(chain.router)
    app.include_router(books.router)
    app.include_router(periods.router)
    app.include_router(subscriptions.router)
    app.include_router(notifications.router)
    app.include_router(metrics_router)  # a bearer with admin or metrics (docs/metrics.md)
    mount_dashboard(app)
    if api_docs:
        mount_api_docs(app)

    app.add_middleware(HeadAsGet)  # inside the access log, which logs the HEAD
    app.add_middleware(AccessLog)
    return app


def app_from_environment() -> FastAPI:
    """The app on the configured database (``DATABASE_URL``, else the embedded one), with
    OIDC JWTs accepted when ``DLC_OIDC_*`` are set, and the limits ``DLC_API_*`` set
    (statement timeout, rate limit; docs/api.md "Limits")."""
    # each worker process of ``api serve --workers N`` logs on its own (a no-op when the
    # process has its logging set up already, as under ``up``)
    configure_logging(logging.INFO, SERVICE_LOG_FORMAT)
    settings = context.settings()
    oidc = settings.oidc()
    verifier = None if oidc is None else OidcVerifier(oidc)  # a bad JWKS file fails here
    base = context.base_database_url(announce=False)
    timeout = settings.api_statement_timeout or None  # 0: none
    store = context.open_api_store(statement_timeout=timeout)  # reads as a reader login
    limits = rate_limiter(settings.api_rate, settings.api_burst)
    return create_app(
        store,
        verifier,
        run_label=context.run_label(base),
        rate_limits=limits,
        public_url=settings.public_url,
        api_docs=settings.api_docs,
        webhook_allow=settings.webhook_allow,
    )


def openapi_document() -> str:
    """The OpenAPI document as committed in docs/openapi.json (stable key order)."""
    return json.dumps(create_app(None).openapi(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m dlc_ledger.api.app > docs/openapi.json
    sys.stdout.write(openapi_document())
