"""What the browser tests share: reading the API as the page does, driving the page, and
what the page should print for a figure — the dashboard's formats (dashboard/format.js)
written once more here, independently, so a test compares text with text.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from playwright.sync_api import Page, expect

from tests.support.dashboard import ARTIFACTS, Served, Watched

__all__ = [
    "INSTANT",
    "NONE",
    "count",
    "duration",
    "every",
    "extent",
    "hours",
    "instant",
    "iso",
    "parse",
    "quantity",
    "route",
    "settled",
    "share",
    "shot",
    "sign_in",
    "slug",
    "stayed_clean",
    "table_rows",
    "texts",
]

#: what the page prints for an absent figure (an en dash)
NONE = "\u2013"
#: the one time format: ISO-like, 24 h, UTC, to the minute
INSTANT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\dZ$")
_PER = {"mGPU": 1000, "milli-cores": 1000, "MiB": 1024}


# --- the page's formats ------------------------------------------------------------------


def quantity(value: float | None, unit: str) -> str:
    """A raw quantity in GPUs, cores or GiB, one decimal, half away from zero."""
    if value is None:
        return NONE
    per = _PER[unit]
    tenths = math.floor((abs(value) * 10 + per / 2) / per) * (-1 if value < 0 else 1)
    return f"{tenths / 10:,.1f}"


def share(part: float, whole: float) -> str:
    return NONE if whole <= 0 else f"{math.floor(100 * part / whole + 0.5)}%"


def hours(value: str | float | None) -> str:
    """A decimal (GPU-hours) to one decimal, half away from zero, grouped."""
    if value is None or value == "":
        return NONE
    return f"{Decimal(str(value)).quantize(Decimal('0.1'), ROUND_HALF_UP):,}"


def count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def duration(seconds: float | None) -> str:
    """Seconds as their two largest units: 273600 -> "3d 4h"."""
    if seconds is None:
        return NONE
    left = math.floor(abs(seconds) + 0.5)
    if left == 0:
        return "0s"
    parts: list[str] = []
    for name, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, left = divmod(left, size)
        if n or parts:
            parts.append(f"{n}{name}" if n else "")
        if len(parts) == 2:
            break
    return ("-" if seconds < 0 else "") + " ".join(p for p in parts if p)


def instant(value: str | datetime | None) -> str:
    if value is None:
        return NONE
    return (value if isinstance(value, datetime) else parse(value)).strftime("%Y-%m-%d %H:%MZ")


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def slug(flavor: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", flavor, flags=re.IGNORECASE)


# --- the API, read as the page reads it --------------------------------------------------


def every(
    served: Served,
    path: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every item of a list route, page after page; and its first page (``at``...)."""
    query: dict[str, Any] = {k: v for k, v in (params or {}).items() if v not in (None, "")}
    query.setdefault("limit", 1000)
    items: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    while True:
        answer = served.api.get(path, params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        first = first or body
        items += body["items"]
        if not body.get("next_cursor"):
            return items, first
        query["cursor"] = body["next_cursor"]


def extent(served: Served) -> dict[str, Any]:
    answer = served.api.get("v1/extent")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


# --- the page ----------------------------------------------------------------------------


def route(path: str, params: dict[str, str]) -> str:
    return path + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def sign_in(
    w: Watched, served: Served, path: str = "#/quotas", *, token: str | None = None
) -> Page:
    page = w.page
    page.goto(served.base + path)
    page.fill("#token", token or served.token)
    page.click("form.sign-in button[type=submit]")
    expect(page.locator("#whoami")).to_contain_text("dash-lead" if token else "dash-admin")
    return page


def settled(page: Page, view: str) -> None:
    """Wait until ``view`` is rendered for the current URL and nothing is loading.

    The URL changes before the hashchange handler starts the render, so the view's
    name alone could match the previous route's content.
    """
    main = page.locator(f'main[data-view="{view}"]:not([aria-busy])')
    expect(main).to_be_visible()
    expect(main).to_have_attribute("data-route", page.evaluate("location.hash"))
    expect(page.locator("#error")).to_be_hidden()


def shot(page: Page, name: str) -> None:
    """The view at a laptop's 1366x768 (the viewport; the page as it scrolls below)."""
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot {path}")


def stayed_clean(w: Watched, served: Served) -> None:
    outside = [u for u in w.requests if not u.startswith((served.base, "data:", "blob:"))]
    assert not outside, f"requests outside the server: {outside}"
    # an error answer (a refused token, a 404 asked for) is logged by the browser as a
    # failed resource: not an error of the page
    errors = [e for e in w.errors if "Failed to load resource" not in e]
    assert not errors, errors


def table_rows(page: Page, selector: str) -> list[dict[str, Any]]:
    """Each row of a table as {data-key: text} plus its bar segments ({name: value})."""
    rows: list[dict[str, Any]] = page.eval_on_selector_all(
        selector,
        """rows => rows.map(r => ({
            cells: Object.fromEntries([...r.children]
                .map(c => [c.dataset.key, c.textContent.trim()])),
            segments: Object.fromEntries([...r.querySelectorAll('.seg')]
                .map(s => [s.dataset.segment, Number(s.dataset.value)])),
            peak: r.querySelector('.peak-tick')
                ? Number(r.querySelector('.peak-tick').dataset.value) : null,
        }))""",
    )
    return rows


def texts(page: Page, selector: str) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        selector, "els => els.map(e => e.textContent.trim())"
    )
    return found
