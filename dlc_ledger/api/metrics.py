"""The API process's Prometheus metrics, served at ``/metrics`` beside ``/v1``.

Like every long-running process (docs/metrics.md), the API exposes its own figures:
requests by route template (never the raw path, to keep label cardinality bounded), method
and status class, and their latency. Under ``dlc-ledger up`` every component shares the
process, so its ``/metrics`` also names quotas, queues and cluster figures: it answers a
bearer token with the ``admin`` or ``metrics`` role only (Prometheus sends one from a
``credentials_file``), to ``GET`` (and ``HEAD``, which the app answers as a ``GET`` for every
route); any other method is a 405. A ``metrics`` token reads nothing else
(:func:`dlc_ledger.api.auth.ledger_principal`).
"""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import Scope

from dlc_ledger.api.auth import current_principal
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.services.access import SCRAPER_ROLES, Principal

__all__ = ["REQUESTS", "REQUEST_SECONDS", "observe", "router"]

router = APIRouter(tags=["metrics"], responses=PROBLEM_RESPONSES)

REQUESTS = Counter(
    "dlc_api_requests_total",
    "API requests answered, by route template, method and status class",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "dlc_api_request_seconds",
    "API request latency, by route template",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def observe(scope: Scope, status: int, seconds: float) -> None:
    """Count one answered request (its ASGI scope) and its duration."""
    route = _route(scope)
    REQUESTS.labels(route, scope["method"], f"{status // 100}xx").inc()
    REQUEST_SECONDS.labels(route).observe(seconds)


def _scraper(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if not set(SCRAPER_ROLES) & set(principal.roles):
        raise HTTPException(403, f"/metrics needs the role {' or '.join(SCRAPER_ROLES)}")
    return principal


@router.get(
    "/metrics",
    summary="Prometheus metrics of this process (roles admin, metrics)",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "The Prometheus text format (OpenMetrics when asked for by Accept)",
        }
    },
)
def get_metrics(request: Request, _principal: Annotated[Principal, Depends(_scraper)]) -> Response:
    """Every metric of the default registry (of every worker process, under ``api serve
    --workers N``), in the format ``Accept`` asks for."""
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encoder(_registry()), media_type=content_type)


def _registry() -> CollectorRegistry:
    """The default registry; in prometheus-client's multiprocess mode (``api serve`` sets
    ``PROMETHEUS_MULTIPROC_DIR`` for its workers) one summing every worker's files, built
    per scrape as the library prescribes."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry
