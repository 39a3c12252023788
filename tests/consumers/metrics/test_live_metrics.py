"""The dispatcher's and the watcher's metrics after known work, scraped over HTTP: Kueue-named
quota gauges, pending workloads, admission waits, decisions by outcome, facts emitted."""

from __future__ import annotations

from tests.support.live import Live
from tests.support.metrics import Scrape, scrape


def _value(found: Scrape, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_cycle_sets_the_quota_gauges_and_counts_its_decisions(
    live: Live, metrics_url: str
) -> None:
    before = scrape(metrics_url)
    a1 = live.submit("a1", "ws-a", 1)
    live.sim.advance(30)  # queued 30 s before the cycle admits it
    assert live.dispatcher.cycle().admitted == (a1,)
    live.sim.advance(5)
    live.submit("b1", "ws-b", 4)  # can never fit beside a1: pending
    second = live.dispatcher.cycle()
    assert second.pending == 1
    after = scrape(metrics_url)

    gpu = {"resource": "gpu/any"}
    assert _value(after, "dlc_pending_workloads", quota="team-b") == 1
    assert _value(after, "dlc_pending_workloads", quota="team-a") == 0
    # the second cycle's input: a1 admitted in team-a (1 GPU), under root
    assert _value(after, "dlc_quota_resource_usage", quota="team-a", **gpu) == 1000
    assert _value(after, "dlc_quota_resource_usage", quota="root", **gpu) == 1000
    assert _value(after, "dlc_quota_resource_usage", quota="team-b", **gpu) == 0
    assert _value(after, "dlc_quota_nominal_quota", quota="team-a", **gpu) == 2000
    assert _value(after, "dlc_quota_nominal_quota", quota="root", **gpu) == 4000
    assert _value(after, "dlc_quota_borrowed_resources", quota="team-a", **gpu) == 0
    assert _value(after, "dlc_quota_lent_resources", quota="team-b", **gpu) == 0

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("dlc_dispatch_decisions_total", outcome="admitted") == 1
    assert delta("dlc_dispatch_decisions_total", outcome="pending") == 1
    assert delta("dlc_dispatch_decision_seconds_count") == 2
    assert delta("dlc_admission_wait_time_seconds_count", quota="team-a") == 1
    assert delta("dlc_admission_wait_time_seconds_sum", quota="team-a") >= 30
    assert delta("dlc_admission_wait_time_seconds_bucket", quota="team-a", le="15.0") == 0
    assert delta("dlc_admission_wait_time_seconds_bucket", quota="team-a", le="60.0") == 1


def test_borrowing_shows_as_borrowed_and_lent(live: Live, metrics_url: str) -> None:
    live.submit("b1", "ws-b", 3)  # team-b's min is 2: it borrows 1 of team-a's idle 2
    live.dispatcher.cycle()
    live.sim.advance(5)
    live.dispatcher.cycle()  # this cycle's input holds b1 admitted
    found = scrape(metrics_url)
    gpu = {"resource": "gpu/any"}
    assert _value(found, "dlc_quota_resource_usage", quota="team-b", **gpu) == 3000
    assert _value(found, "dlc_quota_borrowed_resources", quota="team-b", **gpu) == 1000
    assert _value(found, "dlc_quota_lent_resources", quota="team-a", **gpu) == 1000
    assert _value(found, "dlc_quota_borrowed_resources", quota="root", **gpu) == 0


def test_the_watcher_counts_the_facts_it_emits(live: Live, metrics_url: str) -> None:
    def submitted(found: Scrape) -> float:
        return _value(found, "dlc_watcher_events_total", type="JobSubmitted")

    before = submitted(scrape(metrics_url))
    live.submit("a1", "ws-a", 1)
    live.submit("a2", "ws-a", 1)
    live.project()  # settles the watcher
    assert submitted(scrape(metrics_url)) - before == 2
