"""The dashboard's files as the API app serves them (no browser, no database): ``/`` is
the page with a same-origin-only policy, every module it loads is served from the
package, and none of it enters the OpenAPI document or shadows the API's own answers."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.api.dashboard_mount import CONTENT_SECURITY_POLICY

DASHBOARD = files("dlc_ledger.api") / "dashboard"


def _client() -> TestClient:
    return TestClient(create_app(None), raise_server_exceptions=False)


def _imports(text: str) -> list[str]:
    return re.findall(r'^import .*? from "(\.[^"]+)";$', text, flags=re.MULTILINE)


def test_the_page_and_every_module_it_imports_are_served() -> None:
    client = _client()
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in CONTENT_SECURITY_POLICY
    assert page.text == DASHBOARD.joinpath("index.html").read_text()
    assets = re.findall(r'(?:src|href)="(dashboard/[^"]+)"', page.text)
    assert "dashboard/app.js" in assets and "dashboard/vendor/uPlot.min.css" in assets
    # every module reachable from app.js, by its relative imports
    pending, seen = ["app.js"], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        response = client.get(f"/dashboard/{name}")
        assert response.status_code == 200, name
        assert "javascript" in response.headers["content-type"], name
        base = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
        for target in _imports(response.text):
            parts = (base + target).split("/")
            resolved: list[str] = []
            for part in parts:
                if part == "..":
                    resolved.pop()
                elif part != ".":
                    resolved.append(part)
            pending.append("/".join(resolved))
    # every module in the package is one the page loads (none left behind)
    modules = {str(path.relative_to(str(DASHBOARD))) for path in Path(str(DASHBOARD)).rglob("*.js")}
    assert modules == seen
    assert {"views/month.js", "views/invoices.js", "live.js", "format.js", "window.js"} <= seen
    for asset in assets:
        assert client.get(f"/{asset}").status_code == 200, asset


def test_no_external_url_is_loaded_by_the_page() -> None:
    for path in (DASHBOARD / "index.html", DASHBOARD / "app.css"):
        assert not re.search(r"(src|href)=\"https?://|url\(https?:", path.read_text())
    for module in Path(str(DASHBOARD)).rglob("*.js"):
        if module.parent.name == "vendor":
            continue
        assert "http://" not in module.read_text(), module
        assert "https://" not in module.read_text(), module


def test_the_api_answers_as_before_beside_the_page() -> None:
    client = _client()
    document = client.get("/openapi.json").json()
    assert "/" not in document["paths"]
    assert not [p for p in document["paths"] if p.startswith("/dashboard")]
    missing = client.get("/v1/no-such-route")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert client.get("/v1/whoami").status_code == 401  # still the API's, with no token
    assert client.get("/dashboard/no-such-file.js").status_code == 404


def test_the_vendored_chart_library_carries_its_licence() -> None:
    licence = (DASHBOARD / "vendor" / "uPlot.LICENSE").read_text()
    assert licence.startswith("The MIT License (MIT)")
    readme = (DASHBOARD / "vendor" / "README.md").read_text()
    assert "uPlot 1.6.32" in readme
    assert "(v1.6.32)" in (DASHBOARD / "vendor" / "uPlot.esm.js").read_text()[:400]
