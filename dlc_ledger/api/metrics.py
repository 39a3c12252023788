"""The API process's Prometheus metrics, served at ``/metrics`` beside ``/v1``.

Like every long-running process (docs/metrics.md), the API exposes its own figures:
requests by route template (never the raw path, to keep label cardinality bounded), method
and status class, and their latency. ``/metrics`` needs no token, as Prometheus scrapes
without one; it holds counts and durations only, nothing of any workspace.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram, make_asgi_app
from starlette.requests import Request
from starlette.types import ASGIApp

__all__ = ["REQUESTS", "REQUEST_SECONDS", "metrics_app", "observe"]

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


def _route(request: Request) -> str:
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def observe(request: Request, status: int, seconds: float) -> None:
    """Count one answered request and its duration."""
    route = _route(request)
    REQUESTS.labels(route, request.method, f"{status // 100}xx").inc()
    REQUEST_SECONDS.labels(route).observe(seconds)


def metrics_app() -> ASGIApp:
    """The ``/metrics`` endpoint (prometheus_client's ASGI app on the default registry)."""
    app: ASGIApp = make_asgi_app()
    return app
