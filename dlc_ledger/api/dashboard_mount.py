"""The quota usage dashboard: a static page served by the API process at ``/``.

The page (``dashboard/``: HTML, ES modules, CSS and the vendored chart library) is
shipped in the package and calls the public ``/v1`` API with the viewer's token, so it
needs no route of its own beyond the files. Neither ``/`` nor the assets are in the
OpenAPI document: they are not part of the API.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["ASSETS_PATH", "CONTENT_SECURITY_POLICY", "mount_dashboard"]

ASSETS_PATH = "/dashboard"

#: the page makes no request outside its own origin (no CDN, no fonts, no analytics)
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _index() -> str:
    return (files("dlc_ledger.api") / "dashboard" / "index.html").read_text(encoding="utf-8")


def mount_dashboard(app: FastAPI) -> None:
    """``/`` answers the page; ``/dashboard/...`` its assets (after every other route)."""

    @app.get("/", include_in_schema=False)
    def dashboard_page() -> HTMLResponse:
        return HTMLResponse(_index(), headers=_HEADERS)

    app.mount(
        ASSETS_PATH,
        StaticFiles(packages=[("dlc_ledger.api", "dashboard")]),
        name="dashboard",
    )
