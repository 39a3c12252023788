"""The dashboard in a real browser (Debian's chromium, Playwright) on a replayed trace.

Signs in with a token (a wrong one is refused and asked for again), checks that the
quota tree's figures (in GPUs, cores and GiB, shares of min and max), bar segments and
totals are the API's figures for the same instant, and that a window moves the bars to
the average and peak of each node's series with GPU-hours and cost once per node;
follows a job from the jobs table and from the top jobs by cost to its timeline, shows
why the pending job waits, draws the usage chart with its data table, downloads the
server's CSV, and walks the main controls with Tab. Screenshots go to
test-artifacts/dashboard/. Every request stays on the server's origin and the page logs
no error. (The finance views: test_finance.py; live refresh: test_live.py.)
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from playwright.sync_api import expect
from sqlalchemy import select

from ledger.store.schema import events as events_table
from tests.dlc_ledger.dashboard.pages import (
    INSTANT,
    NONE,
    count,
    duration,
    every,
    extent,
    hours,
    instant,
    iso,
    parse,
    quantity,
    route,
    settled,
    share,
    shot,
    sign_in,
    slug,
    stayed_clean,
    table_rows,
    texts,
)
from tests.dlc_ledger.dashboard.trace import PENDING_JOB
from tests.support.dashboard import ARTIFACTS, Served, Watched

QUANTITIES = (
    "used",
    "min",
    "max",
    "borrowed",
    "lent",
    "lendable",
    "available",
    "queued",
    "over_admitted",
)
COUNTS = ("pending_jobs", "running_jobs")


def segments(row: dict[str, Any]) -> dict[str, int]:
    """The bar's segments as docs/dashboard.md defines them from the tree's fields."""
    within = max(0, min(row["used"] - row["borrowed"], row["min"]))
    over = max(0, min(row["over_admitted"], row["used"] - within))
    borrowed = max(0, row["used"] - within - over)
    lent = max(0, min(row["lent"], max(0, row["min"] - within)))
    free = max(0, row["available"])
    return {"within": within, "borrowed": borrowed, "over": over, "lent": lent, "free": free}


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


def tops(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = {r["quota"] for r in rows}
    return [r for r in rows if r["parent"] is None or r["parent"] not in names]


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
    # a typed instant that is none is refused in the page, naming the format
    page.goto(served.base + "#/quotas")
    settled(page, "quotas")
    page.fill("#q-from", "2027-02-30 10:00Z")
    page.click("form.controls button[type=submit]")
    assert "YYYY-MM-DD HH:MMZ" in page.eval_on_selector("#q-from", "e => e.validationMessage")
    assert "from=" not in page.url
    page.click("#sign-out")
    expect(page.locator("#token")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    stayed_clean(watched, served)


def test_the_default_instant_is_the_latest_data_and_a_replay_says_so(
    watched: Watched, served: Served
) -> None:
    span = extent(served)
    assert span["replayed"] and span["last"]
    page = sign_in(watched, served, "#/quotas")
    settled(page, "quotas")
    expect(page.locator("main h2")).to_have_text(f"Quota tree at {instant(span['last'])}")
    banner = page.locator("#replay")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Replayed data")
    expect(banner).to_contain_text(f"{instant(span['first'])} to {instant(span['last'])}")
    if span["run"]:
        expect(banner).to_contain_text(span["run"])
    # the page asked the tree at that instant, not at the wall clock's
    asked = [u for u in watched.requests if "/v1/quotas/tree" in u]
    assert asked and all("at=" in u for u in asked)
    stayed_clean(watched, served)


def test_the_quota_tree_in_gpus_cores_and_gib_with_shares(watched: Watched, served: Served) -> None:
    at = preemption_instant(served)
    page = sign_in(watched, served, route("#/quotas", {"at": iso(at)}))
    settled(page, "quotas")
    nodes, tree = every(served, "v1/quotas/tree", {"at": iso(at)})
    assert datetime.fromisoformat(tree["at"].replace("Z", "+00:00")) == at
    expect(page.locator("main h2")).to_have_text(f"Quota tree at {instant(at)}")
    borrowing = 0
    units = {"mGPU": "GPUs", "milli-cores": "cores", "MiB": "GiB"}
    for flavor in sorted({r["flavor"] for r in nodes}):
        api_rows = [r for r in nodes if r["flavor"] == flavor]
        unit = api_rows[0]["unit"]
        expect(page.locator(f"#tree-{slug(flavor)} caption")).to_have_text(
            f"Flavor {flavor} ({units[unit]})"
        )
        rows = table_rows(page, f"#tree-{slug(flavor)} tbody tr")
        assert [r["cells"]["quota"] for r in rows] == [r["quota"] for r in api_rows]
        for row, api in zip(rows, api_rows, strict=True):
            for key in QUANTITIES:
                assert row["cells"][key] == quantity(api[key], unit), (flavor, api["quota"], key)
            for key in COUNTS:
                assert row["cells"][key] == count(api[key]), (flavor, api["quota"], key)
            assert row["cells"]["of_min"] == share(api["used"], api["min"])
            assert row["cells"]["of_max"] == share(api["used"], api["max"])
            assert "gpu_hours" not in row["cells"] and "cost" not in row["cells"]
            expected = {k: v for k, v in segments(api).items() if v > 0}
            assert row["segments"] == expected, (flavor, api["quota"])
            # the bar is the node's usage: its used parts add up to the API's used
            assert sum(expected.get(k, 0) for k in ("within", "borrowed", "over")) == api["used"]
            borrowing += expected.get("borrowed", 0)
        (foot,) = table_rows(page, f"#tree-{slug(flavor)} tfoot tr")
        roots = [r for r in api_rows if r["parent"] is None]
        for key in QUANTITIES:
            assert foot["cells"][key] == quantity(sum(r[key] for r in roots), unit), (flavor, key)
    assert borrowing > 0  # at the preemption a borrower's bar has a borrowed segment
    # mGPU / 1000, one decimal: the figure a team lead reads
    shown = table_rows(page, "#tree-gpu-any tbody tr")
    gpus = {r["cells"]["quota"]: r["cells"]["used"] for r in shown}
    for api in (r for r in nodes if r["flavor"] == "gpu/any"):
        tenth = (Decimal(api["used"]) / 1000).quantize(Decimal("0.1"), ROUND_HALF_UP)
        assert gpus[api["quota"]] == f"{tenth:,}"
    legend_colours(page)
    shot(page, "quota-tree")
    stayed_clean(watched, served)


def legend_colours(page: Any) -> None:
    """Every colour a bar shows (its segments, marks and the bar's own ground) is named
    in the legend."""
    drawn: set[str] = set(
        page.eval_on_selector_all(
            ".bar, .bar *",
            "els => els.flatMap(e => [...e.classList])"
            ".filter(c => c.startsWith('seg-') || c.endsWith('-tick') || c === 'bar')",
        )
    )
    swatches: set[str] = set(
        page.eval_on_selector_all(
            ".legend .swatch",
            "els => els.flatMap(e => [...e.classList]).filter(c => c !== 'swatch')",
        )
    )
    named = {c.replace("-tick", "-swatch").replace("bar", "rest-swatch") for c in drawn}
    assert named <= swatches, (named - swatches, swatches)


def test_a_window_moves_the_bars_to_average_and_peak_use(watched: Watched, served: Served) -> None:
    at = preemption_instant(served)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    window = {"from": iso(start), "to": iso(end)}
    page = sign_in(watched, served, route("#/quotas", window))
    settled(page, "quotas")
    expect(page.locator("main h2")).to_have_text(
        f"Quota use from {instant(start)} to {instant(end)}"
    )
    nodes, _ = every(served, "v1/quotas/tree", {**window, "at": iso(end)})
    quotas = list(dict.fromkeys(r["quota"] for r in nodes))
    moved = 0
    for quota in quotas:
        series, _ = every(served, f"v1/quotas/{quota}/series", {**window, "step": "hour"})
        kept = [p for p in series if start <= parse(p["at"]) < end]
        for api in (r for r in nodes if r["quota"] == quota):
            used = [p["used"] for p in kept if p["flavor"] == api["flavor"]]
            average, peak = sum(used) / len(used), max(used)
            rows = table_rows(page, f"#tree-{slug(api['flavor'])} tbody tr")
            (row,) = [r for r in rows if r["cells"]["quota"] == quota]
            unit = api["unit"]
            assert row["cells"]["average"] == quantity(average, unit), (quota, api["flavor"])
            assert row["cells"]["peak"] == quantity(peak, unit), (quota, api["flavor"])
            assert row["cells"]["of_min"] == share(average, api["min"])
            assert row["cells"]["of_max"] == share(average, api["max"])
            within = min(average, api["min"])
            expected = {"within": within, "borrowed": max(0, average - within)}
            assert row["segments"] == {k: v for k, v in expected.items() if v > 0}
            assert row["peak"] == (peak if peak > 0 else None)
            moved += average != api["used"]
    assert moved  # over the window the bars are not the instant's
    # GPU-hours and cost once per node, not under every flavor's table
    cost_rows = table_rows(page, "#tree-cost tbody tr")
    assert [r["cells"]["quota"] for r in cost_rows] == quotas
    first = {q: next(r for r in nodes if r["quota"] == q) for q in quotas}
    for row in cost_rows:
        api = first[row["cells"]["quota"]]
        assert row["cells"]["gpu_hours"] == hours(api["gpu_hours"])
        assert row["cells"]["cost"] == (api.get("cost_display") or NONE)
    (foot,) = table_rows(page, "#tree-cost tfoot tr")
    (root,) = tops(list(first.values()))
    assert foot["cells"]["cost"] == root["cost_display"]
    legend_colours(page)
    shot(page, "quota-window")
    stayed_clean(watched, served)


def test_a_job_from_the_jobs_table_and_from_top_jobs_to_its_timeline(
    watched: Watched, served: Served
) -> None:
    page = sign_in(watched, served, "#/jobs")
    settled(page, "jobs")
    listed = served.api.get("v1/jobs", params={"limit": 50}).json()["items"]
    # the table names each job with its user, quota, GPU request and model, GPU-hours, cost
    rows = table_rows(page, "#jobs tbody tr")
    assert len(rows) == len(listed)
    for row, api in zip(rows, listed, strict=True):
        cells = row["cells"]
        assert cells["name"] == (api["name"] or api["job_uid"])
        assert (cells["user"], cells["quota"]) == (api["user"] or NONE, api["quota"] or NONE)
        assert cells["gpu_request"] == quantity(api["gpu_request_mgpu"], "mGPU")
        assert cells["gpu_model"] == (api["gpu_model"] or NONE)
        assert cells["gpu_hours"] == hours(api["gpu_hours"])
        assert cells["cost"] == (api["cost_display"] or NONE)
        assert cells["running_seconds"] == duration(api["running_seconds"])
        assert INSTANT.match(cells["submitted_at"]) or cells["submitted_at"] == NONE
    shot(page, "jobs")
    job = next(j for j in listed if j["status"] == "Succeeded")
    page.click(f'#jobs a[href="#/job/{job["job_uid"]}"]')
    settled(page, "job")
    detail = served.api.get(f"v1/jobs/{job['job_uid']}").json()
    expect(page.locator("main h2")).to_have_text(f"Job {detail['name']}")
    # durations as durations, money as the API's strings: never seconds or minor units
    ran = page.locator('.facts [data-key="ran"]')
    expect(ran).to_have_text(duration(detail["running_seconds"]))
    assert texts(page, "#job-cost tbody [data-key=posted]") == [
        c["posted_display"] for c in detail["cost"]
    ]
    assert "running seconds" not in page.inner_text("main")
    types = texts(page, "#timeline tbody [data-key=type]")
    assert types == [t["type"] for t in detail["timeline"]] and len(types) >= 3
    assert texts(page, "#timeline tbody [data-key=occurred_at]") == [
        instant(t["occurred_at"]) for t in detail["timeline"]
    ]
    shot(page, "job-timeline")
    # its CSV is the server's list of the same entries, byte for byte
    with page.expect_download() as info:
        page.click('button.csv[data-table="timeline"]')
    assert info.value.suggested_filename == f"timeline-{job['job_uid']}.csv"
    target = ARTIFACTS / info.value.suggested_filename
    info.value.save_as(target)
    path = f"v1/jobs/{job['job_uid']}/timeline"
    server = served.api.get(path, params={"format": "csv", "limit": 1000})
    assert server.headers["content-type"].startswith("text/csv")
    assert target.read_bytes().decode() == server.text
    saved = list(csv.DictReader(io.StringIO(server.text)))
    assert [(r["type"], r["event_id"]) for r in saved] == [
        (t["type"], t["event_id"]) for t in detail["timeline"]
    ]

    # the costliest job, from the cost view's top 20
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    top = served.api.get("v1/cost/top", params={"by": "job", "n": 20}).json()
    costliest = next(r for r in top["items"] if r["status"])  # a job, not "(rounding)"
    page.click(f'#top-cost a[href="#/job/{costliest["job"]}"]')
    settled(page, "job")
    job_page = served.api.get(f"v1/jobs/{costliest['job']}").json()
    expect(page.locator("main h2")).to_have_text(f"Job {job_page['name']}")
    assert page.locator("#timeline tbody tr").count() == len(job_page["timeline"])
    stayed_clean(watched, served)


def test_the_pending_job_says_why_and_where_it_queues(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/queues/ls")
    settled(page, "queues")
    expect(page.locator(f'#queue a[href="#/job/{PENDING_JOB}"]')).to_be_visible()
    queue = served.api.get("v1/queues/ls", params={"at": extent(served)["last"]}).json()
    head = queue["items"][0]
    (row,) = [r for r in table_rows(page, "#queue tbody tr") if r["cells"]["position"] == "1"]
    assert row["cells"]["job_uid"] == head["name"]
    assert row["cells"]["waited_seconds"] == duration(head["waited_seconds"])
    assert row["cells"]["request"] == ", ".join(
        f"{k} {quantity(v, 'mGPU')} GPUs" for k, v in head["request"].items()
    )
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
    # what it needs against what the quotas have, in GPUs
    figures = table_rows(page, "#why table tbody tr")
    assert [r["cells"]["request"] for r in figures] == [
        quantity(f["request"], "mGPU") for f in pending["figures"]
    ]
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
    page = sign_in(watched, served, route("#/series/openb", params))
    settled(page, "series")
    items, _ = every(served, "v1/quotas/openb/series", params)
    flavors = list(dict.fromkeys(r["flavor"] for r in items))
    expect(page.locator("figure.chart canvas")).to_have_count(len(flavors))
    page.locator("details summary").first.click()
    first = [r for r in items if r["flavor"] == flavors[0]]
    rows = table_rows(page, f"#series-{slug(flavors[0])} tbody tr")
    assert len(rows) == len(first)
    for row, api in zip(rows, first, strict=True):
        assert row["cells"]["at"] == instant(api["at"])
        assert row["cells"]["used"] == quantity(api["used"], api["unit"])
    # the chart writes times as the tables do: its legend's time under the cursor
    plot = page.locator("figure.chart .u-over").first
    box = plot.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    legend_time = page.locator("figure.chart").first.locator(".u-legend .u-series").first
    expect(legend_time.locator(".u-value")).to_have_text(INSTANT)
    shot(page, "usage-series")
    stayed_clean(watched, served)


def test_a_team_leads_token_sees_its_subtree_and_jobs_only(
    watched: Watched, served: Served
) -> None:
    lead = {"Authorization": f"Bearer {served.lead_token}"}
    page = sign_in(watched, served, token=served.lead_token)
    expect(page.locator("#whoami")).to_contain_text("workspaces ws-burstable")
    settled(page, "quotas")
    last = extent(served)["last"]
    tree, _ = every(served, "v1/quotas/tree", {"at": last}, headers=lead)
    everything, _ = every(served, "v1/quotas/tree", {"at": last})
    assert 0 < len(tree) < len(everything)
    shown_quotas = texts(page, "main table[id^=tree-] tbody [data-key=quota]")
    assert shown_quotas == [r["quota"] for r in tree]
    # the totals are the subtree's top nodes' (their parent is not the lead's to see)
    for flavor in sorted({r["flavor"] for r in tree}):
        top = tops([r for r in tree if r["flavor"] == flavor])
        assert top and all(r["parent"] is not None for r in top)
        (foot,) = table_rows(page, f"#tree-{slug(flavor)} tfoot tr")
        assert foot["cells"]["quota"] == f"Total ({', '.join(r['quota'] for r in top)})"
        for key in QUANTITIES:
            assert foot["cells"][key] == quantity(sum(r[key] for r in top), top[0]["unit"])
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    # its jobs only (a row that is no job, cost posted without one, names no workspace)
    jobs = [
        r["cells"] for r in table_rows(page, "#top-cost tbody tr") if r["cells"]["status"] != NONE
    ]
    assert jobs and {r["workspace"] for r in jobs} == {"ws-burstable"}
    shot(page, "team-lead-cost")
    stayed_clean(watched, served)


def test_csv_download_is_the_servers(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served, "#/quotas")
    settled(page, "quotas")
    last = extent(served)["last"]
    flavor = every(served, "v1/quotas/tree", {"at": last})[0][0]["flavor"]
    with page.expect_download() as info:
        page.click(f'button.csv[data-table="tree-{slug(flavor)}"]')
    saved = info.value
    assert saved.suggested_filename == "quotas-tree.csv"
    target = ARTIFACTS / saved.suggested_filename
    saved.save_as(target)
    text = target.read_bytes().decode()
    server = served.api.get("v1/quotas/tree", params={"at": last, "format": "csv", "limit": 1000})
    assert server.headers["content-type"].startswith("text/csv")
    assert text == server.text  # the server's file, byte for byte, not one built in the page
    rows = list(csv.DictReader(io.StringIO(text)))
    api, _ = every(served, "v1/quotas/tree", {"at": last})
    # the CSV keeps the raw units (mGPU, milli-cores, MiB)
    assert [(r["quota"], r["flavor"], r["used"], r["unit"]) for r in rows] == [
        (r["quota"], r["flavor"], str(r["used"]), r["unit"]) for r in api
    ]

    # the cost by workspace and month, as the server writes it
    page.click('nav a[href="#/cost"]')
    settled(page, "cost")
    with page.expect_download() as info:
        page.click('button.csv[data-table="cost-ws-month"]')
    target = ARTIFACTS / info.value.suggested_filename
    info.value.save_as(target)
    # with each workspace's prepaid cost beside it (issue 47)
    query = {"group_by": "workspace,month", "with_prepaid": "true"}
    server = served.api.get("v1/cost", params={**query, "format": "csv", "limit": 1000})
    assert target.read_bytes().decode() == server.text
    by_month, _ = every(served, "v1/cost", query)
    assert [r["cost_display"] for r in csv.DictReader(io.StringIO(server.text))] == [
        r["cost_display"] for r in by_month
    ]
    assert texts(page, "#cost-ws-month tbody [data-key=cost]") == [
        r["cost_display"] for r in by_month
    ]
    assert texts(page, "#cost-ws-month tbody [data-key=prepaid]") == [
        r["prepaid_display"] for r in by_month
    ]
    stayed_clean(watched, served)


def test_the_main_controls_are_reached_with_tab(watched: Watched, served: Served) -> None:
    page = sign_in(watched, served)
    page.reload()  # the token stays for the tab; the focus starts at the document's top
    settled(page, "quotas")
    reached: list[str] = []
    outlines: list[str] = []
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate(
                "() => { const e = document.activeElement;"
                " return `${e.tagName.toLowerCase()}:${e.id || e.textContent.trim()}`; }"
            )
        )
        outlines.append(page.evaluate("getComputedStyle(document.activeElement).outlineStyle"))
    for control in ("a:Quota tree", "a:Usage over time", "a:Queues and waits", "a:Jobs",
                    "a:Services", "a:Cost", "a:Month to date", "a:Budgets", "a:Invoices",
                    "a:Subscriptions", "a:Notifications", "button:sign-out", "input:q-at",
                    "input:q-from", "input:q-to", "button:Show", "button:Last 24 h",
                    "button:Whole data", "button:Download CSV"):  # fmt: skip
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
    granted = served.api.put("/v1/notifications/secrets/ws-burstable/DASH_HOOK")
    assert granted.status_code == 200, granted.text
    answer = served.api.put("/v1/notifications/rules/ws-burstable/dash-failures", json=rule)
    assert answer.status_code in (200, 201), answer.text
    try:
        page = sign_in(watched, served, "#/notifications")
        settled(page, "notifications")
        rows = table_rows(page, "#notification-rules tbody tr")
        shown_rules = {(r["cells"]["workspace"], r["cells"]["name"]) for r in rows}
        assert ("ws-burstable", "dash-failures") in shown_rules
        assert "webhook:http://127.0.0.1:9/hook" in page.inner_text("#notification-rules")
        deliveries = served.api.get("v1/notifications/deliveries", params={"limit": 100}).json()
        shown_deliveries = texts(page, "#notification-deliveries tbody [data-key=rule]")
        assert shown_deliveries == [d["rule"] for d in deliveries["items"]]
        expect(page.locator("#notification-deliveries")).to_be_visible()
        shot(page, "notifications")
        stayed_clean(watched, served)
    finally:
        served.api.delete("/v1/notifications/rules/ws-burstable/dash-failures")
