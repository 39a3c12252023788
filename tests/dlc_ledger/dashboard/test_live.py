"""The dashboard stays current on its own: a view refreshes every 5 s while the tab is
visible, says when it last read, picks up data appended after it was loaded without
reloading the page or losing what was typed or focused, pauses while the tab is hidden
and refreshes as soon as it is shown again.

The page's clock is Playwright's (``page.clock``), so five seconds pass when the test
says so; the hidden tab is ``document.visibilityState`` stubbed and a
``visibilitychange`` dispatched, as the Page Visibility API would.
"""

from __future__ import annotations

from playwright.sync_api import Page, Route, expect

from consumers.projector import Projector
from ledger.events import JobSubmitted, ReplicaSpec
from projections.registry import all_projections
from tests.dlc_ledger.dashboard.pages import extent, parse, settled, sign_in, stayed_clean
from tests.support.builders import Narrator
from tests.support.dashboard import Served, Watched

NAME = "dash-live"


def submit(served: Served, number: int) -> str:
    """A job submitted at the data's latest instant (so the extent does not move)."""
    name = f"{NAME}-{number:04d}"
    uid = f"{name}-uid"
    n = Narrator(f"dashboard-live-{number}")
    n.tell(
        JobSubmitted(
            job_uid=uid,
            name=name,
            namespace="team-be",
            kind="PyTorchJob",
            framework="pytorch",
            workspace="ws-be",
            quota="be",
            user="erin",
            priority=0,
            replicas=(ReplicaSpec(count=1, mgpu=1000, cpu_milli=4000, memory_mib=16384),),
        ),
        f"job/{uid}",
        parse(extent(served)["last"]),
        source="kube-watcher/dashboard-test",
    )
    served.store.append(n.events)
    Projector(served.store, all_projections()).catch_up()
    return name


def visibility(page: Page, state: str) -> None:
    page.evaluate(
        """state => {
            const stub = (name, value) => Object.defineProperty(
                document, name, {configurable: true, get: () => value});
            stub('visibilityState', state);
            stub('hidden', state === 'hidden');
            document.dispatchEvent(new Event('visibilitychange'));
        }""",
        state,
    )


def jobs_read(url: str) -> bool:
    """The route pattern of the jobs list's reads."""
    return "/v1/jobs?" in url


def api_reads(w: Watched) -> int:
    return len([u for u in w.requests if "/v1/" in u])


def test_a_view_refreshes_itself_and_pauses_while_hidden(watched: Watched, served: Served) -> None:
    page = watched.page
    page.clock.install()
    sign_in(watched, served, f"#/jobs?q={NAME}")
    settled(page, "jobs")
    expect(page.locator("main")).to_contain_text(f"No job's name contains “{NAME}”")
    indicator = page.locator("#updated")
    expect(indicator).to_have_text("updated 0 s ago")
    page.clock.run_for(2000)
    expect(indicator).to_have_text("updated 2 s ago")
    # what the viewer is doing: typing a filter, not yet submitted; a marker on the page
    page.evaluate("window.__notReloaded = true")
    page.fill("#j-workspace", "ws-b")
    page.focus("#j-workspace")

    first = submit(served, 1)
    page.clock.run_for(3500)  # five seconds after the last read: refreshed
    expect(page.locator("#jobs")).to_contain_text(first)
    expect(indicator).to_have_text("updated 0 s ago")
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#j-workspace")).to_have_value("ws-b")
    expect(page.locator("#j-workspace")).to_be_focused()
    assert page.url.endswith(f"#/jobs?q={NAME}")

    # hidden: no read at all, however long, and the indicator says it is paused
    visibility(page, "hidden")
    expect(indicator).to_contain_text("paused")
    second = submit(served, 2)
    before = api_reads(watched)
    page.clock.run_for(30_000)
    page.wait_for_timeout(300)  # a read the page would start now would be recorded
    assert api_reads(watched) == before
    expect(page.locator("#jobs")).not_to_contain_text(second)
    expect(indicator).to_have_text("paused while hidden · updated 30 s ago")

    # shown again: refreshed at once, not five seconds later
    visibility(page, "visible")
    expect(page.locator("#jobs")).to_contain_text(second)
    expect(indicator).to_have_text("updated 0 s ago")
    assert api_reads(watched) > before
    stayed_clean(watched, served)


def test_one_refresh_at_a_time(watched: Watched, served: Served) -> None:
    """A refresh slower than the interval is never overlapped by the next one."""
    page = watched.page
    page.clock.install()
    sign_in(watched, served, "#/jobs")
    settled(page, "jobs")
    # hold every jobs read until released, so the first refresh stays in flight
    held: list[Route] = []
    page.route(jobs_read, lambda r: held.append(r))
    page.clock.run_for(5000)
    page.wait_for_timeout(300)
    assert len(held) == 1
    page.clock.run_for(20_000)  # four more intervals while the first is in flight
    page.wait_for_timeout(300)
    assert len(held) == 1
    held[0].continue_()
    page.unroute(jobs_read)
    expect(page.locator("#updated")).to_have_text("updated 0 s ago")
    stayed_clean(watched, served)
