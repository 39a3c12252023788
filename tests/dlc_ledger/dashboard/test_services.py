"""The dashboard's services view in a real browser (issue 46, part 2): the services and
notebooks the token sees, one service's desired replicas over time (the step chart and its
table) and its rated cost per day with the prepaid baseline and the spill apart, against
the API's figures; a workspace's token sees its own services only, and an unknown or
hidden uid says so.

Its own small world (tests/dlc_ledger/dashboard/workloads.py), no replay: a few seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.dashboard.pages import (
    NONE,
    count,
    every,
    hours,
    instant,
    quantity,
    settled,
    shot,
    sign_in,
    stayed_clean,
    table_rows,
    texts,
)
from tests.dlc_ledger.dashboard.workloads import NOTEBOOK, SPILLING, seed
from tests.support.dashboard import Served, Watched, require_chromium, serving, watching
from tests.support.databases import TemplateDatabases


@pytest.fixture(scope="module")
def services(databases: TemplateDatabases) -> Iterator[Served]:
    """The two services, a notebook and a job, served with an admin token and the token
    of workspace ws-sub (the spilling service's)."""
    require_chromium()
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        seed(store)
        with serving(store, "workspace:ws-sub") as out:
            yield out
    finally:
        store.close()
        databases.drop(url)


@pytest.fixture
def page_of(browser: Browser, services: Served) -> Iterator[Watched]:
    with watching(browser) as out:
        yield out


def cells(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [r["cells"] for r in rows]


def desired(row: dict[str, Any]) -> int:
    """The desired replicas now: none once deleted (as the replica history ends)."""
    return 0 if row["deleted_at"] else sum(r["replicas"] for r in row["replicas"])


def test_the_services_one_service_s_replicas_and_its_cost_against_the_api(
    page_of: Watched, services: Served
) -> None:
    page = sign_in(page_of, services, "#/services")
    settled(page, "services")
    expect(page.locator('#views a[href="#/services"]')).to_have_attribute("aria-current", "page")
    listed, _ = every(services, "v1/services")
    shown = cells(table_rows(page, "#services tbody tr"))
    assert [r["name"] for r in shown] == [r["name"] for r in listed]
    for row, api in zip(shown, listed, strict=True):
        assert (row["namespace"], row["workspace"], row["quota"], row["status"]) == (
            api["namespace"], api["workspace"], api["quota"] or "\u2013", api["status"]
        )  # fmt: skip
        assert row["desired"] == count(desired(api))
        gpus = 0 if api["deleted_at"] else api["gpu_request_mgpu"]
        assert row["gpu_request"] == quantity(gpus, "mGPU")
        assert (row["gpu_hours"], row["cost"]) == (hours(api["gpu_hours"]), api["cost_display"])
    shot(page, "services")
    # the notebooks' tab
    page.click('.tabs a[data-list="notebooks"]')
    settled(page, "services")
    notebooks, _ = every(services, "v1/notebooks")
    assert texts(page, '#notebooks tbody th[data-key="name"]') == [n["name"] for n in notebooks]
    # a notebook's page: its cost is the report's by job (a notebook has no service key)
    page.click('#notebooks a:text-is("dsw-bob")')
    settled(page, "services")
    expect(page.locator("main h2").first).to_have_text("Notebook default/dsw-bob")
    steps = cells(table_rows(page, "#replicas tbody tr"))
    assert [(r["desired"], r["occupied"]) for r in steps] == [("1", "1"), ("1", "0")]
    life = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-01T02:01:00Z", "source": "rated"}
    (own,) = [
        r
        for r in every(services, "v1/cost", {**life, "group_by": "job"})[0]
        if r["job"] == NOTEBOOK
    ]
    expect(page.locator("#service-cost-total strong")).to_have_text(own["cost_display"])

    # ns1/ranker: 1 replica at 0 s, 2 from 600 s, none from its deletion at 3600 s
    page.goto(services.base + "#/services")
    settled(page, "services")
    page.click('#services a:text-is("ranker")')
    settled(page, "services")
    detail = services.api.get("v1/services/svc").json()
    expect(page.locator("main h2").first).to_have_text("Service ns1/ranker")
    # the window: the service's life, to the minute after its deletion
    expect(page.locator("#v-from")).to_have_attribute("placeholder", "2026-11-01 00:00Z")
    expect(page.locator("#v-to")).to_have_attribute("placeholder", "2026-11-01 01:01Z")
    steps = cells(table_rows(page, "#replicas tbody tr"))
    assert [(r["at"], r["desired"], r["change"]) for r in steps] == [
        (instant(c["at"]), str(c["replicas"]), c["change"]) for c in detail["replica_history"]
    ]
    assert [r["occupied"] for r in steps] == [str(o["pods"]) for o in detail["occupied_history"]]
    # desired and occupied: 1 from 0 s, 2 from 600 s, none from 3600 s
    assert [(r["at"], r["desired"], r["occupied"]) for r in steps] == [
        ("2026-11-01 00:00Z", "1", "1"),
        ("2026-11-01 00:10Z", "2", "2"),
        ("2026-11-01 01:00Z", "0", "0"),
    ]
    assert steps[1]["by"] == "eas-autoscaler"
    expect(page.locator('figure.chart[data-live="replica-chart"] canvas')).to_have_count(1)
    # its cost over its life, the server's figure (rated), as the API gives it
    window = {"from": "2026-11-01T00:00:00Z", "to": "2026-11-01T01:01:00Z", "source": "rated"}
    (total,) = [
        r
        for r in every(services, "v1/cost", {**window, "group_by": "service"})[0]
        if r["service"] == "ns1/ranker"
    ]
    expect(page.locator("#service-cost-total strong")).to_have_text(total["cost_display"])
    assert total["cost_display"] == "4.40 USD"  # 6,600 GPU-seconds at 2.40 an hour
    shot(page, "service")
    # a window typed: the counts in force at its start lead, the changes in it follow
    page.fill("#v-from", "2026-11-01 00:05Z")
    page.fill("#v-to", "2026-11-01 00:30Z")
    page.click('form[aria-label="Window"] button[type=submit]')
    settled(page, "services")
    steps = cells(table_rows(page, "#replicas tbody tr"))
    assert [(r["at"], r["desired"], r["occupied"], r["change"]) for r in steps] == [
        ("2026-11-01 00:05Z", "1", "1", "in force"),
        ("2026-11-01 00:10Z", "2", "2", "scaled"),
    ]
    part = {"from": "2026-11-01T00:05:00Z", "to": "2026-11-01T00:30:00Z", "source": "rated"}
    (total,) = [
        r
        for r in every(services, "v1/cost", {**part, "group_by": "service"})[0]
        if r["service"] == "ns1/ranker"
    ]
    expect(page.locator("#service-cost-total strong")).to_have_text(total["cost_display"])

    # ns2/search spills: per day, its prepaid baseline and its pay-as-you-go spill apart
    page.goto(services.base + f"#/services/{SPILLING}")
    settled(page, "services")
    rows = every(
        services,
        "v1/cost",
        {"from": "2027-01-03T23:00:00Z", "to": "2027-01-04T01:01:00Z", "source": "rated",
         "group_by": "service,day,billing_mode"},
    )[0]  # fmt: skip
    api_days: dict[str, dict[str, str]] = {}
    for r in rows:
        if r["service"] == "ns2/search":
            api_days.setdefault(r["day"], {})[r["billing_mode"]] = r["cost_display"]
    shown_days = {
        r["day"]: {"quota": r["quota"], "public": r["public"]}
        for r in cells(table_rows(page, "#service-cost tbody tr"))
    }
    assert shown_days == api_days
    assert api_days["2027-01-03"]["quota"] == "0.00 USD"  # the baseline: prepaid
    assert api_days["2027-01-03"]["public"] != "0.00 USD"  # the third replica spilled
    # scaled to 3 at 23:01, its replicas bound one by one; down to 2, then deleted
    steps = cells(table_rows(page, "#replicas tbody tr"))
    assert [(r["at"][11:], r["desired"], r["occupied"], r["change"]) for r in steps] == [
        ("23:00Z", "1", "1", "created"),
        ("23:01Z", "3", "1", "scaled"),
        ("23:02Z", "3", "2", NONE),
        ("23:03Z", "3", "3", NONE),
        ("00:02Z", "2", "2", "scaled"),
        ("01:00Z", "0", "0", "deleted"),
    ]
    shot(page, "service-spilling")
    # its job page (the audit timeline) and back
    page.click("text=its job page")
    settled(page, "job")
    page.click("text=its service page")
    settled(page, "services")
    expect(page.locator("main h2").first).to_have_text("Service ns2/search")
    stayed_clean(page_of, services)


def test_a_workspace_sees_its_services_only_and_an_unknown_one_is_said_so(
    page_of: Watched, services: Served
) -> None:
    page = sign_in(page_of, services, "#/services", token=services.lead_token)
    settled(page, "services")
    assert texts(page, '#services tbody th[data-key="name"]') == ["search"]
    for uid in ("svc", "no-such-service"):  # another workspace's, and none
        page.goto(services.base + f"#/services/{uid}")
        settled(page, "services")
        expect(page.locator("#not-found")).to_contain_text(f"No service or notebook “{uid}”")
        expect(page.locator("#not-found")).to_contain_text("(404)")
    stayed_clean(page_of, services)


def test_a_service_s_page_refreshes_and_keeps_its_unchanged_charts(
    page_of: Watched, services: Served
) -> None:
    page = page_of.page
    page.clock.install()
    sign_in(page_of, services, f"#/services/{SPILLING}")
    settled(page, "services")
    charts = page.locator("figure.chart canvas")
    expect(charts).to_have_count(2)
    page.eval_on_selector_all("figure.chart canvas", "cs => cs.forEach(c => c.dataset.kept = 1)")
    reads = len([u for u in page_of.requests if f"/v1/services/{SPILLING}" in u])
    page.clock.run_for(5000)
    expect(page.locator("#updated")).to_have_text("updated 0 s ago")
    assert len([u for u in page_of.requests if f"/v1/services/{SPILLING}" in u]) == reads + 1
    # nothing changed: the charts are the ones drawn first, not redrawn
    expect(page.locator("figure.chart canvas[data-kept]")).to_have_count(2)
    expect(page.locator("#replicas tbody tr")).to_have_count(6)
    stayed_clean(page_of, services)
