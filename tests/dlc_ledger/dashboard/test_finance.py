"""The finance views in a real browser, each figure against the API's JSON for the same
query: the cost view's top N (one request to ``/v1/cost/top``, its total the server's
string) and the window presets, the month-to-date headline, budgets, invoices (list,
filters, lines, credit notes, a void), subscriptions with their utilisation and resource
groups. A screenshot of each view at 1366x768 goes to test-artifacts/dashboard/.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import expect

from tests.dlc_ledger.dashboard.pages import (
    INSTANT,
    NONE,
    count,
    every,
    extent,
    hours,
    instant,
    iso,
    parse,
    quantity,
    settled,
    shot,
    sign_in,
    stayed_clean,
    table_rows,
    texts,
)
from tests.dlc_ledger.dashboard.trace import CREDITED
from tests.support.dashboard import Served, Watched


def top_row(api: dict[str, Any]) -> dict[str, str]:
    """A top-jobs row as the page prints it (dashboard/views/jobs.js ``jobColumns``)."""
    return {
        "name": api["name"] or api["job"],
        "user": api["user"] or NONE,
        "quota": api["quota"] or NONE,
        "workspace": api["workspace"] or NONE,
        "gpu_request": quantity(api["gpu_request_mgpu"], "mGPU"),
        "gpu_model": api["gpu_model"] or NONE,
        "status": api["status"] or NONE,
        "gpu_hours": hours(api["gpu_hours"]),
        "cost": api["cost_display"],
    }


def preset_window(span: dict[str, Any], preset: str) -> tuple[datetime, datetime]:
    """The window a preset means over the data's extent (dashboard/window.js ``windowOf``)."""
    last = parse(span["last"])
    end = (
        last
        if last.second == 0 and last.microsecond == 0
        else last.replace(second=0, microsecond=0) + timedelta(minutes=1)
    )
    if preset == "24h":
        return end - timedelta(hours=24), end
    if preset == "7d":
        return end - timedelta(days=7), end
    if preset == "month":
        return datetime(last.year, last.month, 1, tzinfo=UTC), end
    return parse(span["first"]).replace(second=0, microsecond=0), end


def test_the_top_jobs_by_cost_are_one_request_and_the_total_is_the_servers(
    watched: Watched, served: Served
) -> None:
    page = sign_in(watched, served, "#/cost")
    settled(page, "cost")
    top = served.api.get("v1/cost/top", params={"by": "job", "n": 20}).json()
    # one request computes the list: no page of every job's cost is read
    asked = [u for u in watched.requests if "/v1/cost" in u]
    assert len([u for u in asked if "/v1/cost/top?" in u]) == 1
    assert not [
        u for u in asked if "group_by=workspace%2Cjob" in u or "group_by=workspace,job" in u
    ]
    # the total is the server's string, to the minor unit (never added up in the page)
    expect(page.locator('#cost-total [data-key="total"]')).to_have_text(
        top["total"]["cost_display"]
    )
    expect(page.locator("#cost-total")).to_contain_text(
        f"{hours(top['total']['gpu_hours'])} GPU-hours"
    )
    rows = table_rows(page, "#top-cost tbody tr")
    assert [r["cells"] for r in rows] == [top_row(r) for r in top["items"]]
    assert len(rows) == min(20, top["count"])
    shot(page, "cost")

    # by user: one request again, its rows and total the server's
    page.select_option("#c-by", "user")
    page.click("form.controls button[type=submit]")
    settled(page, "cost")
    by_user = served.api.get("v1/cost/top", params={"by": "user", "n": 20}).json()
    rows = table_rows(page, "#top-cost tbody tr")
    assert [(r["cells"]["user"], r["cells"]["cost"]) for r in rows] == [
        (r["user"] or NONE, r["cost_display"]) for r in by_user["items"]
    ]
    expect(page.locator('#cost-total [data-key="total"]')).to_have_text(
        by_user["total"]["cost_display"]
    )
    stayed_clean(watched, served)


def test_the_presets_change_the_window(watched: Watched, served: Served) -> None:
    span = extent(served)
    page = sign_in(watched, served, "#/cost")
    settled(page, "cost")
    for preset, label in (
        ("7d", "Last 7 d"),
        ("month", "This month"),
        ("24h", "Last 24 h"),
        ("all", "Whole data"),
    ):
        page.get_by_role("button", name=label, exact=True).click()
        expect(page).to_have_url(f"{served.base}#/cost?preset={preset}&by=job&n=20")
        settled(page, "cost")
        expect(page.locator(f'button[data-preset="{preset}"]')).to_have_attribute(
            "aria-pressed", "true"
        )
        start, end = preset_window(span, preset)
        top = served.api.get(
            "v1/cost/top", params={"by": "job", "n": 20, "from": iso(start), "to": iso(end)}
        ).json()
        expect(page.locator("#cost-total")).to_contain_text(
            f"Total from {instant(start)} to {instant(end)}: {top['total']['cost_display']}"
        )
        assert texts(page, "#top-cost tbody [data-key=cost]") == [
            r["cost_display"] for r in top["items"]
        ]
        # the inputs show the preset's window as their hint, in the one time format
        assert page.get_attribute("#c-from", "placeholder") == instant(start)
        assert page.get_attribute("#c-to", "placeholder") == instant(end)
    # a typed window replaces the preset
    page.fill("#c-from", instant(parse(span["first"])))
    page.fill("#c-to", "2027-03-01 00:00")
    page.click("form.controls button[type=submit]")
    settled(page, "cost")
    assert "preset=" not in page.url and "to=2027-03-01T00%3A00%3A00Z" in page.url
    stayed_clean(watched, served)


def test_month_to_date_per_workspace(watched: Watched, served: Served) -> None:
    last = extent(served)["last"]
    page = sign_in(watched, served, "#/month")
    settled(page, "month")
    rows, _ = every(served, "v1/month-to-date", {"at": last, "with_prepaid": "true"})
    assert rows
    # issue 47: a workspace on subscribed capacity shows what it cost, not only 0.00
    assert any(r["prepaid_minor"] > 0 for r in rows)
    for api in rows:
        card = page.locator(f'article.card[data-workspace="{api["workspace"]}"]')
        expect(card.locator("[data-key=cost]")).to_have_text(api["cost_display"] or NONE)
        expect(card.locator("[data-key=prepaid]")).to_have_text(api["prepaid_display"] or NONE)
        expect(card.locator("[data-key=forecast]")).to_have_text(api["forecast_display"] or NONE)
        budget = api["budget"]
        expect(card.locator("[data-key=budget]")).to_have_text(
            budget["limit_display"] if budget else NONE
        )
        expect(card.locator("[data-key=left]")).to_have_text(
            budget["left_display"] if budget else NONE
        )
        expect(card.locator("[data-key=state]")).to_have_text(
            budget["state"] if budget else "no budget"
        )
    assert texts(page, "#month-to-date tbody [data-key=workspace]") == [
        r["workspace"] for r in rows
    ]
    assert texts(page, "#month-to-date tbody [data-key=prepaid]") == [
        r["prepaid_display"] for r in rows
    ]
    shot(page, "month-to-date")
    stayed_clean(watched, served)


def test_budgets_with_their_state(watched: Watched, served: Served) -> None:
    last = extent(served)["last"]
    page = sign_in(watched, served, "#/budgets")
    settled(page, "budgets")
    budgets, _ = every(served, "v1/budgets", {"at": last})
    assert {b["workspace"] for b in budgets} == {"ws-ls", "ws-burstable"}
    rows = table_rows(page, "#budgets tbody tr")
    assert [
        (
            r["cells"]["workspace"],
            r["cells"]["limit"],
            r["cells"]["spent"],
            r["cells"]["left"],
            r["cells"]["state"],
        )
        for r in rows
    ] == [
        (b["workspace"], b["limit_display"], b["spent_display"], b["left_display"], b["state"])
        for b in budgets
    ]
    shot(page, "budgets")
    stayed_clean(watched, served)


def test_invoices_lines_credit_notes_and_voids(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/invoices")
    settled(page, "invoices")
    invoices, _ = every(served, "v1/invoices", {"limit": 100})
    rows = table_rows(page, "#invoices tbody tr")
    keys = ("status", "total", "credited", "paid", "open")
    shown = [tuple(r["cells"][k] for k in keys) for r in rows]
    assert shown == [
        (i["payment_status"], i["total_display"], i["credited_display"], i["paid_display"],
         i["open_display"])
        for i in invoices
    ]  # fmt: skip
    assert {i["payment_status"] for i in invoices} >= {"overdue", "voided"}
    shot(page, "invoices")
    # the filters are the API's
    page.select_option("#i-status", "voided")
    page.click("form.controls button[type=submit]")
    page.wait_for_url("**/#/invoices?*status=voided*")  # the filtered route, not the old one
    settled(page, "invoices")
    (voided,) = every(served, "v1/invoices", {"status": "voided"})[0]
    assert texts(page, "#invoices tbody [data-key=invoice_id]") == [
        f"{voided['workspace']} {voided['period']}"
    ]
    page.click(f'#invoices a[href="#/invoice/{voided["invoice_id"]}"]')
    settled(page, "invoice")
    detail = served.api.get(f"v1/invoices/{voided['invoice_id']}").json()
    expect(page.locator("#voided")).to_contain_text(detail["void_reason"])
    expect(page.locator('#invoice-facts [data-key="total"]')).to_have_text(detail["total_display"])
    shot(page, "invoice-voided")
    # the credited invoice: its lines, its credit note, its totals as the ledger gives them
    credited = next(i for i in invoices if i["workspace"] == CREDITED and i["credited_minor"])
    page.goto(f"{served.base}#/invoices?workspace={CREDITED}&period={credited['period']}")
    settled(page, "invoices")
    page.click(f'#invoices a[href="#/invoice/{credited["invoice_id"]}"]')
    settled(page, "invoice")
    detail = served.api.get(f"v1/invoices/{credited['invoice_id']}").json()
    assert texts(page, "#invoice-lines tbody [data-key=amount]") == [
        line["amount_display"] for line in detail["lines"]
    ]
    expect(page.locator('#invoice-lines tfoot [data-key="amount"]')).to_have_text(
        detail["total_display"]
    )
    expect(page.locator('#invoice-facts [data-key="credited"]')).to_have_text(
        detail["credited_display"]
    )
    notes = table_rows(page, "#credit-notes tbody tr")
    assert [(n["cells"]["amount"], n["cells"]["reason"]) for n in notes] == [
        (c["amount_display"], c["reason"]) for c in detail["credit_notes"]
    ]
    # its partial payment, what is still open, and that it is overdue
    for key, field in (("paid", "paid_display"), ("open", "open_display")):
        expect(page.locator(f'#invoice-facts [data-key="{key}"]')).to_have_text(detail[field])
    expect(page.locator('#invoice-facts [data-key="status"]')).to_have_text("overdue")
    expect(page.locator("#overdue")).to_contain_text(detail["open_display"])
    (paid,) = table_rows(page, "#payments tbody tr")
    assert (paid["cells"]["reference"], paid["cells"]["amount"]) == (
        "dashboard-wire",
        detail["payments"][0]["amount_display"],
    )
    assert all(INSTANT.match(t) for t in texts(page, "main time"))
    shot(page, "invoice")
    stayed_clean(watched, served)


def test_subscriptions_their_utilisation_and_resource_groups(
    watched: Watched, served: Served
) -> None:
    span = extent(served)
    page = sign_in(watched, served, "#/subscriptions")
    settled(page, "subscriptions")
    subs, _ = every(served, "v1/subscriptions", {"at": span["last"]})
    assert subs
    rows = table_rows(page, "#subscriptions tbody tr")
    assert [
        (r["cells"]["subscription_id"], r["cells"]["status"], r["cells"]["paid"]) for r in rows
    ] == [(s["subscription_id"], s["status"], s["paid_display"]) for s in subs]
    # utilisation over the whole data by default (the preset), GPU-hours to one decimal
    start, end = preset_window(span, "all")
    use, _ = every(
        served,
        "v1/subscription-utilisation",
        {"from": iso(start), "to": iso(end), "group_by": "group"},
    )
    assert use
    shown = table_rows(page, "#utilisation tbody tr")
    assert [
        (
            r["cells"]["group"],
            r["cells"]["used_gpu_hours"],
            r["cells"]["utilisation"],
            r["cells"]["cost_display"],
        )
        for r in shown
    ] == [
        (u["group"], hours(u["used_gpu_hours"]), u["utilisation"], u["cost_display"]) for u in use
    ]
    groups, _ = every(served, "v1/resource-groups", {"at": span["last"]})
    shown_groups = table_rows(page, "#resource-groups tbody tr")
    assert [
        (g["cells"]["group"], g["cells"]["subscribed_nodes"], g["cells"]["delivered_nodes"])
        for g in shown_groups
    ] == [(g["group"], count(g["subscribed_nodes"]), count(g["delivered_nodes"])) for g in groups]
    shot(page, "subscriptions")
    # by quota: the report's other grouping, from the form
    page.select_option("#u-by", "quota")
    page.click("form.controls button[type=submit]")
    settled(page, "subscriptions")
    by_quota, _ = every(
        served,
        "v1/subscription-utilisation",
        {"from": iso(start), "to": iso(end), "group_by": "quota"},
    )
    assert texts(page, "#utilisation tbody [data-key=cost_by_use_display]") == [
        u["cost_by_use_display"] for u in by_quota
    ]
    stayed_clean(watched, served)


def test_every_view_writes_instants_one_way(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/quotas?preset=7d")
    views = ["quotas", "series", "queues", "jobs", "cost", "month", "budgets", "invoices",
             "subscriptions", "notifications"]  # fmt: skip
    for view in views:
        page.goto(f"{served.base}#/{view}" + ("?preset=7d" if view in ("quotas", "cost") else ""))
        settled(page, view)
        times = texts(page, "main time")
        assert all(INSTANT.match(t) for t in times), (view, times)
        values = page.eval_on_selector_all(
            "main input[id$='-at'], main input[id$='-from'], main input[id$='-to']",
            "els => els.flatMap(e => [e.value, e.placeholder])"
            ".filter(v => /^\\d{4}-/.test(v) || v.startsWith('latest: '))",
        )
        assert all(INSTANT.match(v.removeprefix("latest: ")) for v in values), (view, values)
        body = page.inner_text("main")
        assert " UTC" not in body.replace("(UTC)", ""), view  # the former "… 14:05:00 UTC"
        assert "AM" not in body.split() and "PM" not in body.split(), view
    stayed_clean(watched, served)
