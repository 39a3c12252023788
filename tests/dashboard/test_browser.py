"""The dashboard in a real browser (Debian's chromium, Playwright) on a replayed trace.

Signs in with a token (a wrong one is refused and asked for again), checks that the
quota tree's figures, bar segments and totals are the API's figures for the same
instant and window (read here with httpx from the same routes), follows a job from the
jobs table and from the top jobs by cost to its timeline, shows why the pending job
waits, draws the usage chart with its data table, downloads the server's CSV, and walks
the main controls with Tab. Screenshots go to test-artifacts/dashboard/. Every request
stays on the server's origin and the page logs no error.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from playwright.sync_api import Page, expect
from sqlalchemy import select

from ledger.store.schema import events as events_table
from tests.dashboard.conftest import ARTIFACTS, Served, Watched, bootstrap, broker
from tests.dashboard.trace import PENDING_JOB

__all__ = ["bootstrap", "broker"]  # the fixtures the module-scoped replay uses

#: what the page prints for an absent figure (an en dash)
NONE = "\u2013"
FIGURES = ("min", "max", "used", "borrowed", "lent", "lendable", "available",
           "over_admitted", "queued", "pending_jobs", "running_jobs")  # fmt: skip


# --- what the page shows, computed here from the API's JSON ---------------------------


def shown(value: Any) -> str:
    """A figure as the page prints it (dom.js ``num``): grouped thousands, NONE for none."""
    if value is None or value == "":
        return NONE
    if isinstance(value, int):
        return f"{value:,}"
    whole, _, frac = str(value).partition(".")
    grouped = f"{int(whole):,}" if whole not in ("-0", "") else whole
    return grouped + (f".{frac}" if frac else "")


def segments(row: dict[str, Any]) -> dict[str, int]:
    """The bar's segments as docs/dashboard.md defines them from the tree's fields."""
    within = max(0, min(row["used"] - row["borrowed"], row["min"]))
    over = max(0, min(row["over_admitted"], row["used"] - within))
    borrowed = max(0, row["used"] - within - over)
    lent = max(0, min(row["lent"], max(0, row["min"] - within)))
    free = max(0, row["available"])
    return {"within": within, "borrowed": borrowed, "over": over, "lent": lent, "free": free}


def every(
    served: Served,
    path: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every item of a list route, page after page; and its first page (``at``...)."""
    query: dict[str, Any] = {**(params or {}), "limit": 1000}
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


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def slug(flavor: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", flavor, flags=re.IGNORECASE)


def preemption_instant(served: Served) -> datetime:
    """When the slice's borrower was reclaimed: the tree lends and borrows then."""
    with served.store.engine.connect() as conn:
        at = conn.execute(
            select(events_table.c.occurred_at)
            .where(events_table.c.type == "PreemptionDecided")
            .order_by(events_table.c.position)
            .limit(1)
        ).scalar_one()
    assert isinstance(at, datetime)
    return at


# --- the page --------------------------------------------------------------------------


def sign_in(
    w: Watched, served: Served, route: str = "#/quotas", *, token: str | None = None
) -> Page:
    page = w.page
    page.goto(served.base + route)
    page.fill("#token", token or served.token)
    page.click("form.sign-in button[type=submit]")
    expect(page.locator("#whoami")).to_contain_text("dash-lead" if token else "dash-admin")
    return page


def settled(page: Page, view: str) -> None:
    """Wait until ``view`` is rendered and nothing is loading."""
    expect(page.locator(f'main[data-view="{view}"]:not([aria-busy])')).to_be_visible()
    expect(page.locator("#error")).to_be_hidden()


def shot(page: Page, name: str) -> None:
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
        }))""",
    )
    return rows


# --- tests -----------------------------------------------------------------------------


def test_a_wrong_token_is_asked_for_again_and_problems_are_shown(
    watched: Watched, served: Served
) -> None:
    page = watched.page
    page.goto(served.base)
    page.fill("#token", "dlct_not-a-token")
    page.click("form.sign-in button[type=submit]")
    expect(page.locator("form.sign-in .warn")).to_contain_text("refused")
    expect(page.locator("#token")).to_be_focused()
    page.fill("#token", served.token)
    page.click("form.sign-in button[type=submit]")
    expect(page.locator("#whoami")).to_contain_text("admin")
    settled(page, "quotas")
    # the API's problem details are shown as they come
    page.goto(served.base + "#/job/no-such-job")
    problem = served.api.get("v1/jobs/no-such-job").json()
    expect(page.locator("#error")).to_have_text(
        f"{problem['title']} ({problem['status']}): {problem['detail']}"
    )
    page.goto(served.base + "#/cost?from=2027-03-01T00:00:00Z&to=2027-02-01T00:00:00Z")
    expect(page.locator("#error")).to_contain_text("(400): to must be after from")
    page.click("#sign-out")
    expect(page.locator("#token")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    stayed_clean(watched, served)


def test_quota_bars_figures_and_totals_are_the_apis(watched: Watched, served: Served) -> None:
    at = preemption_instant(served)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    params = {"at": iso(at), "from": iso(start), "to": iso(end)}
    page = sign_in(watched, served, "#/quotas?" + "&".join(f"{k}={v}" for k, v in params.items()))
    settled(page, "quotas")
    nodes, tree = every(served, "v1/quotas/tree", params)
    assert datetime.fromisoformat(tree["at"].replace("Z", "+00:00")) == at
    expect(page.locator("main h2")).to_contain_text(at.strftime("%Y-%m-%d %H:%M:%S"))
    flavors = sorted({r["flavor"] for r in nodes})
    borrowing = 0
    for flavor in flavors:
        api_rows = [r for r in nodes if r["flavor"] == flavor]
        rows = table_rows(page, f"#tree-{slug(flavor)} tbody tr")
        assert [r["cells"]["quota"] for r in rows] == [r["quota"] for r in api_rows]
        for row, api in zip(rows, api_rows, strict=True):
            for key in FIGURES:
                assert row["cells"][key] == shown(api[key]), (flavor, api["quota"], key)
            assert row["cells"]["gpu_hours"] == shown(api["gpu_hours"])
            assert row["cells"]["cost_display"] == (api.get("cost_display") or NONE)
            expected = {k: v for k, v in segments(api).items() if v > 0}
            assert row["segments"] == expected, (flavor, api["quota"])
            # the bar is the node's usage: its used parts add up to the API's used
            used = sum(expected.get(k, 0) for k in ("within", "borrowed", "over"))
            assert used == api["used"], (flavor, api["quota"])
            borrowing += expected.get("borrowed", 0)
        (foot,) = table_rows(page, f"#tree-{slug(flavor)} tfoot tr")
        roots = [r for r in api_rows if r["parent"] is None]
        for key in FIGURES:
            assert foot["cells"][key] == shown(sum(r[key] for r in roots)), (flavor, key)
        hours = sum((Decimal(r["gpu_hours"]) for r in roots), Decimal(0))
        assert Decimal(foot["cells"]["gpu_hours"].replace(",", "")) == hours
        (currency,) = {r["currency"] for r in roots}
        cost = sum(r["cost_minor"] for r in roots) / Decimal(10) ** roots[0]["scale"]
        assert foot["cells"]["cost_display"] == f"{cost:,.{roots[0]['scale']}f} {currency}"
    assert borrowing > 0  # at the preemption a borrower's bar has a borrowed segment
    shot(page, "quota-tree")
    stayed_clean(watched, served)


def test_a_job_from_the_jobs_table_and_from_top_jobs_to_its_timeline(
    watched: Watched, served: Served
) -> None:
    page = sign_in(watched, served, "#/jobs")
    settled(page, "jobs")
    listed = served.api.get("v1/jobs").json()["items"]
    job = next(j for j in listed if j["status"] == "Succeeded")
    page.click(f'#jobs a[href="#/job/{job["job_uid"]}"]')
    settled(page, "job")
    detail = served.api.get(f"v1/jobs/{job['job_uid']}").json()
    expect(page.locator("main h2")).to_have_text(f"Job {detail['name']}")
    types = page.eval_on_selector_all(
        "#timeline tbody tr",
        "rows => rows.map(r => r.querySelector('[data-key=type]').textContent)",
    )
    assert types == [t["type"] for t in detail["timeline"]] and len(types) >= 3
    shot(page, "job-timeline")
    # its CSV is the server's list of the same entries, byte for byte
    with page.expect_download() as info:
        page.click('button.csv[data-table="timeline"]')
    assert info.value.suggested_filename == f"timeline-{job['job_uid']}.csv"
    target = ARTIFACTS / info.value.suggested_filename
    info.value.save_as(target)
    route = f"v1/jobs/{job['job_uid']}/timeline"
    server = served.api.get(route, params={"format": "csv", "limit": 1000})
    assert server.headers["content-type"].startswith("text/csv")
    assert target.read_bytes().decode() == server.text
    saved = list(csv.DictReader(io.StringIO(server.text)))
    assert [(r["type"], r["event_id"]) for r in saved] == [
        (t["type"], t["event_id"]) for t in detail["timeline"]
    ]
    assert every(served, route)[0] == detail["timeline"]

    # the costliest job, from the cost view's top 20
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    by_job, _ = every(served, "v1/cost", {"group_by": "workspace,job"})
    top = sorted(by_job, key=lambda r: (-r["cost_minor"], r["job"]))[:20]
    shown_top = page.eval_on_selector_all(
        "#top-jobs tbody tr",
        "rows => rows.map(r => [r.querySelector('[data-key=job]').textContent,"
        " r.querySelector('[data-key=cost_display]').textContent])",
    )
    assert shown_top == [[r["job"], r["cost_display"]] for r in top]
    by_month, _ = every(served, "v1/cost", {"group_by": "workspace,month"})
    months = page.eval_on_selector_all(
        "#cost-ws-month tbody tr",
        "rows => rows.map(r => r.querySelector('[data-key=cost_display]').textContent)",
    )
    assert months == [r["cost_display"] for r in by_month] and months
    (currency,) = {r["currency"] for r in by_month}
    scale = by_month[0]["scale"]
    total = sum(r["cost_minor"] for r in by_month) / Decimal(10) ** scale
    expect(page.locator('#cost-ws-month tfoot [data-key="cost_display"]')).to_have_text(
        f"{total:,.{scale}f} {currency}"
    )
    shot(page, "cost")
    page.click(f'#top-jobs a[href="#/job/{top[0]["job"]}"]')
    settled(page, "job")
    costliest = served.api.get(f"v1/jobs/{top[0]['job']}").json()
    expect(page.locator("main h2")).to_have_text(f"Job {costliest['name']}")
    assert page.locator("#timeline tbody tr").count() == len(costliest["timeline"])
    stayed_clean(watched, served)


def test_the_pending_job_says_why_and_where_it_queues(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/queues/ls")
    settled(page, "queues")
    expect(page.locator(f'#queue a[href="#/job/{PENDING_JOB}"]')).to_be_visible()
    shot(page, "queues")
    page.click(f'#queue a[href="#/job/{PENDING_JOB}"]')
    settled(page, "job")
    why = served.api.get(f"v1/jobs/{PENDING_JOB}/why").json()
    assert why["answer"] == "pending"
    pending = why["pending"]
    position = page.locator('#why [data-key="queue position"]')
    expect(position).to_have_text(f"{pending['position']} of {pending['queue_length']}")
    expect(page.locator('#why [data-key="reason"]')).to_contain_text(pending["reason"])
    expect(page.locator('#why [data-key="estimated start"]')).to_be_visible()
    shot(page, "job-pending")

    # the slice's preemption, from the queues view to the victim's page: by whom, why
    page.go_back()
    settled(page, "queues")
    (preemption,), _ = every(served, "v1/preemptions")
    page.click(f'#preemptions a[href="#/job/{preemption["victim_uid"]}"]')
    settled(page, "job")
    victim = served.api.get(f"v1/jobs/{preemption['victim_uid']}/why").json()
    assert len(victim["preemptions"]) == 1
    rows = page.locator("#why table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(preemption["preemptor"])
    stayed_clean(watched, served)


def test_the_queue_at_the_preemption_is_the_one_the_tree_counts(served: Served) -> None:
    # queues as they stood then, not as projected now: every quota's queue at the slice's
    # preemption holds as many jobs as the tree's pending_jobs there (ls waits for many)
    params = {"at": iso(preemption_instant(served))}
    nodes, _ = every(served, "v1/quotas/tree", params)
    counted = {r["quota"]: r["pending_jobs"] for r in nodes if r["flavor"] == "gpu/any"}
    listed = {q: len(every(served, f"v1/queues/{q}", params)[0]) for q in counted}
    assert listed == counted and counted["ls"] > 1


def test_usage_series_chart_with_its_table(watched: Watched, served: Served) -> None:
    at = preemption_instant(served)
    params = {"from": iso(at - timedelta(days=2)), "to": iso(at), "step": "hour"}
    page = sign_in(
        watched, served, "#/series/openb?" + "&".join(f"{k}={v}" for k, v in params.items())
    )
    settled(page, "series")
    items, _ = every(served, "v1/quotas/openb/series", params)
    flavors = sorted({r["flavor"] for r in items})
    expect(page.locator("figure.chart canvas")).to_have_count(len(flavors))
    page.locator("details summary").first.click()
    rows = page.locator("details table").first.locator("tbody tr")
    first = [r for r in items if r["flavor"] == items[0]["flavor"]]
    expect(rows).to_have_count(len(first))
    shot(page, "usage-series")
    stayed_clean(watched, served)


def test_a_team_leads_token_sees_its_subtree_and_jobs_only(
    watched: Watched, served: Served
) -> None:
    lead = {"Authorization": f"Bearer {served.lead_token}"}
    page = sign_in(watched, served, token=served.lead_token)
    expect(page.locator("#whoami")).to_contain_text("workspaces ws-burstable")
    settled(page, "quotas")
    tree, _ = every(served, "v1/quotas/tree", headers=lead)
    everything, _ = every(served, "v1/quotas/tree")
    assert 0 < len(tree) < len(everything)
    shown_quotas = page.eval_on_selector_all(
        "main table tbody tr",
        "rows => rows.map(r => r.querySelector('[data-key=quota]').textContent)",
    )
    assert shown_quotas == [r["quota"] for r in tree]
    # the totals are the subtree's top nodes' (their parent is not the lead's to see)
    names = {r["quota"] for r in tree}
    for flavor in sorted({r["flavor"] for r in tree}):
        tops = [r for r in tree if r["flavor"] == flavor and r["parent"] not in names]
        assert tops and all(r["parent"] is not None for r in tops)
        (foot,) = table_rows(page, f"#tree-{slug(flavor)} tfoot tr")
        assert foot["cells"]["quota"] == f"Total ({', '.join(r['quota'] for r in tops)})"
        for key in FIGURES:
            assert foot["cells"][key] == shown(sum(r[key] for r in tops)), (flavor, key)
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    workspaces = page.eval_on_selector_all(
        "#top-jobs tbody tr",
        "rows => rows.map(r => r.querySelector('[data-key=workspace]').textContent)",
    )
    assert workspaces and set(workspaces) == {"ws-burstable"}
    shot(page, "team-lead-cost")
    stayed_clean(watched, served)


def test_csv_download_is_the_servers(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/quotas")
    settled(page, "quotas")
    flavor = every(served, "v1/quotas/tree")[0][0]["flavor"]
    with page.expect_download() as info:
        page.click(f'button.csv[data-table="tree-{slug(flavor)}"]')
    saved = info.value
    assert saved.suggested_filename == "quotas-tree.csv"
    target = ARTIFACTS / saved.suggested_filename
    saved.save_as(target)
    text = target.read_bytes().decode()
    server = served.api.get("v1/quotas/tree", params={"format": "csv", "limit": 1000})
    assert server.headers["content-type"].startswith("text/csv")
    assert text == server.text  # the server's file, byte for byte, not one built in the page
    rows = list(csv.DictReader(io.StringIO(text)))
    api, _ = every(served, "v1/quotas/tree")
    assert [(r["quota"], r["flavor"], r["used"]) for r in rows] == [
        (r["quota"], r["flavor"], str(r["used"])) for r in api
    ]

    # the cost by workspace and month, as the server writes it
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    with page.expect_download() as info:
        page.click('button.csv[data-table="cost-ws-month"]')
    target = ARTIFACTS / info.value.suggested_filename
    info.value.save_as(target)
    server = served.api.get(
        "v1/cost", params={"group_by": "workspace,month", "format": "csv", "limit": 1000}
    )
    assert target.read_bytes().decode() == server.text
    by_month, _ = every(served, "v1/cost", {"group_by": "workspace,month"})
    assert [r["cost_display"] for r in csv.DictReader(io.StringIO(server.text))] == [
        r["cost_display"] for r in by_month
    ]
    stayed_clean(watched, served)


def test_the_main_controls_are_reached_with_tab(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served)
    page.reload()  # the token stays for the tab; the focus starts at the document's top
    settled(page, "quotas")
    reached: list[str] = []
    outlines: list[str] = []
    # a datetime input takes one Tab per field (month, day, year, hour...): 60 presses
    for _ in range(60):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate(
                "() => { const e = document.activeElement;"
                " return `${e.tagName.toLowerCase()}:${e.id || e.textContent.trim()}`; }"
            )
        )
        outlines.append(page.evaluate("getComputedStyle(document.activeElement).outlineStyle"))
    for control in ("a:Quota tree", "a:Usage over time", "a:Queues and waits", "a:Jobs",
                    "a:Cost", "button:sign-out", "input:q-at", "input:q-from", "input:q-to",
                    "button:Show", "button:Download CSV"):  # fmt: skip
        assert control in reached, (control, reached)
    # every control shows where the focus is (the page's body, reached after the last
    # control when focus leaves the page, is no control)
    hidden = [
        (control, outline)
        for control, outline in zip(reached, outlines, strict=True)
        if outline == "none" and not control.startswith("body:")
    ]
    assert not hidden, hidden
    assert (
        reached.index("a:Quota tree") < reached.index("input:q-at") < reached.index("button:Show")
    )
    # a view is opened from the keyboard alone
    page.locator('nav a[href="#/jobs"]').focus()
    page.keyboard.press("Enter")
    settled(page, "jobs")
    expect(page.locator("#jobs tbody tr").first).to_be_visible()
    stayed_clean(watched, served)


def test_the_notifications_view_shows_rules_and_deliveries(
    watched: Watched, served: Served
) -> None:
    rule = {
        "events": ["JobFailed"],
        "target": {"webhook": "http://127.0.0.1:9/hook", "secret_env": "DASH_HOOK"},
    }
    answer = served.api.put("/v1/notifications/rules/ws-burstable/dash-failures", json=rule)
    assert answer.status_code in (200, 201), answer.text
    try:
        page = sign_in(watched, served, "#/notifications")
        settled(page, "notifications")
        rows = table_rows(page, "#notification-rules tbody tr")
        shown_rules = {(r["cells"]["workspace"], r["cells"]["name"]) for r in rows}
        assert ("ws-burstable", "dash-failures") in shown_rules
        assert "webhook:http://127.0.0.1:9/hook" in page.inner_text("#notification-rules")
        expect(page.locator("#notification-deliveries")).to_be_visible()
        stayed_clean(watched, served)
    finally:
        served.api.delete("/v1/notifications/rules/ws-burstable/dash-failures")
