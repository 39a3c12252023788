"""``/docs``: Swagger UI from the package, when the server is asked for it (``DLC_API_DOCS=1``).

FastAPI's own ``/docs`` and ``/redoc`` load their code and fonts from a CDN onto this
origin, where a token pasted into "Authorize" is within that code's reach; they are off
(``create_app``). This page runs only files shipped in the wheel (``apidocs/``: a vendored
Swagger UI and its start-up script, no inline script) under a Content-Security-Policy
that lets nothing else load. ``/openapi.json`` is served either way.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["DOCS_CONTENT_SECURITY_POLICY", "DOCS_PATH", "mount_api_docs"]

DOCS_PATH = "/docs"

#: the dashboard's policy: this origin's files only; images also as data: URIs (Swagger
#: UI's icons in its stylesheet)
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _page() -> str:
    return (files("dlc_ledger.api") / "apidocs" / "index.html").read_text(encoding="utf-8")


def mount_api_docs(app: FastAPI) -> None:
    """``/docs`` answers the page, ``/docs/assets/...`` its files; neither is in the
    OpenAPI document."""

    @app.get(DOCS_PATH, include_in_schema=False)
    def api_docs_page() -> HTMLResponse:
        return HTMLResponse(
            _page(), headers={"Content-Security-Policy": DOCS_CONTENT_SECURITY_POLICY}
        )

    app.mount(
        f"{DOCS_PATH}/assets",
        StaticFiles(packages=[("dlc_ledger.api", "apidocs")]),
        name="api-docs",
    )
