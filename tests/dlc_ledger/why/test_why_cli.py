"""``jobs why``, ``queue show`` and ``report estimates`` through the real CLI, on projected
state built from events (real PostgreSQL, the real projector), against hand-computed answers.

The tree: ``root`` (8 GPUs) over ``team-a`` (StrictFIFO) and ``team-b`` (BestEffortFIFO),
4 GPUs each, no borrowing.
Three finished jobs: team-a's ran 600 s and 1800 s, team-b's 500 s. No class of comparable
jobs has the 5 a class needs (``ledger.dispatch.runtimes``): a pending job's run time is
that of all three, median 600 s; a running job too few of them outlasted is on a heavy
tail from the median of all or its age, whichever is longer: ``P(run > x) = 600 / x`` for
the jobs here, median 1200 s.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from consumers.projector import Projector
from dlc_ledger.services.billing import tick
from dlc_ledger.services.dispatch import queue_page, why_job
from dlc_ledger.services.quotas import apply_quota_file
from ledger.events import (
    AdmissionDecided,
    JobAdmitted,
    JobDeleted,
    JobPreempted,
    JobQueued,
    JobSubmitted,
    JobSucceeded,
    OccupancyEnded,
    OccupancyStarted,
    PreemptionDecided,
    PriceBookPublished,
    Rates,
    ReplicaSpec,
    Victim,
)
from ledger.store.postgres import PostgresEventStore
from projections.dispatch.reports import Coverage, DecisionWindow, estimate_coverage
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at
from tests.support.clis import CliCall

TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000}
  - name: team-a
    parent: root
    min: {gpu/any: 4000}
    max: {gpu/any: 4000}
    preemption: {within_quota: LowerPriority}
    queue_policy: StrictFIFO
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/any: 4000}
    max: {gpu/any: 4000}
    preemption: {within_quota: LowerPriority}
    workspaces: [ws-b]
"""


def _iso(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _plain(seconds: float) -> str:
    """As the row renderer writes an instant in JSON and CSV."""
    return (EPOCH + timedelta(seconds=seconds)).isoformat()


def _submit(n: Narrator, uid: str, queued: float, mgpu: int, ws: str = "ws-a", **kw: int) -> None:
    n.tell(
        JobSubmitted(
            job_uid=uid,
            name=f"job-{uid}",
            namespace="ns",
            workspace=ws,
            priority=kw.get("priority", 3),
            replicas=(ReplicaSpec(mgpu=mgpu, cpu_milli=0, memory_mib=0),),
        ),
        f"job/{uid}",
        at(queued),
    )
    n.tell(JobQueued(job_uid=uid), f"job/{uid}", at(queued))


def _run(
    n: Narrator, uid: str, start: float, mgpu: int, end: float | None = None, **kw: str
) -> None:
    n.tell(JobAdmitted(job_uid=uid, by="dispatcher"), f"job/{uid}", at(start))
    n.tell(
        OccupancyStarted(
            occupancy_id=f"pod-{uid}",
            job_uid=uid,
            pod_uid=f"pod-{uid}",
            node="n1",
            mgpu=mgpu,
            cpu_milli=0,
            memory_mib=0,
            workspace=kw.get("ws", "ws-a"),
            started_at=at(start),
        ),
        f"job/{uid}",
        at(start),
    )
    if end is not None:
        n.tell(
            OccupancyEnded(
                occupancy_id=f"pod-{uid}",
                job_uid=uid,
                pod_uid=f"pod-{uid}",
                ended_at=at(end),
                reason=kw.get("reason", "completed"),
            ),
            f"job/{uid}",
            at(end),
        )


def _admit_decision(n: Narrator, uid: str, quota: str, when: float) -> None:
    n.tell(
        AdmissionDecided(job_uid=uid, quota=quota, outcome="admit"),
        f"quota/{quota}",
        at(when),
        source="dispatcher",
    )


@pytest.fixture
def cluster(store: PostgresEventStore) -> Narrator:
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    n.tell(
        PriceBookPublished(
            book_id="b1",
            currency="USD",
            scale=2,
            effective_from=EPOCH,
            rates=Rates(public={"gpu/any": Decimal("3.60")}),
            idle_multiplier=Decimal("0.3"),
        ),
        "pricebook/b1",
        EPOCH,
        source="api/test",
    )
    # history: two finished team-a jobs, 600 s and 1800 s in Running
    for uid, length in (("f1", 600), ("f2", 1800)):
        _submit(n, uid, 0, 1000)
        _run(n, uid, 0, 1000, length)
        n.tell(JobSucceeded(job_uid=uid), f"job/{uid}", at(length))
    # team-b: v ran from 1000 with 2 GPUs, preempted for hp (decided at 1990, pod gone at
    # 2000), then deleted; hp ran 2000-2500
    _submit(n, "v", 900, 2000, "ws-b", priority=1)
    _admit_decision(n, "v", "team-b", 1000)
    _run(n, "v", 1000, 2000, 2000, ws="ws-b", reason="preempted")
    _submit(n, "hp", 1980, 4000, "ws-b", priority=9)
    n.tell(
        PreemptionDecided(
            preemptor="hp",
            victims=(Victim(job_uid="v", quota="team-b", reason="WithinQuota"),),
            reason="WithinQuota",
            state={"team-b": {"gpu/any.used": 4000, "gpu/any.min": 4000}},
            quota="team-b",
        ),
        "quota/team-b",
        at(1990),
        source="dispatcher",
    )
    n.tell(JobPreempted(job_uid="v", by="dispatcher"), "job/v", at(1995))
    n.tell(JobDeleted(job_uid="v", by="alice"), "job/v", at(2100))
    _admit_decision(n, "hp", "team-b", 2000)
    _run(n, "hp", 2000, 4000, 2500, ws="ws-b")
    n.tell(JobSucceeded(job_uid="hp"), "job/hp", at(2500))
    # now (3600): team-a full with r1 (admitted 3000) and r2 (3300), three waiting
    for uid, start in (("r1", 3000), ("r2", 3300)):
        _submit(n, uid, start - 100, 2000)
        _admit_decision(n, uid, "team-a", start)
        _run(n, uid, start, 2000)
    _submit(n, "w1", 3100, 2000)
    _submit(n, "big", 3150, 6000)
    _submit(n, "w2", 3200, 2000)
    # team-b: b1 runs 1 GPU from 3600 (the latest fact: "now"), b2 wants all 4
    _submit(n, "b1", 3500, 1000, "ws-b")
    _run(n, "b1", 3600, 1000, ws="ws-b")
    _submit(n, "b2", 3050, 4000, "ws-b")
    store.append(n.events)
    Projector(store, all_projections()).catch_up()
    return n


def test_a_job_blocked_behind_others(cluster: Narrator, cli: CliCall) -> None:
    doc = json.loads(cli("jobs", "why", "job-w1", "--format", "json"))
    assert (doc["answer"], doc["quota"], doc["now"]) == ("pending", "team-a", _iso(3600))
    pending = doc["pending"]
    assert pending["reason"] == "WaitingForQuota"
    # team-a's queue: w1 (3100), big (3150), w2 (3200); the tree's adds b2 (3050) first
    assert (pending["position"], pending["queue_length"]) == (1, 3)
    assert (pending["cohort_position"], pending["cohort_length"]) == (2, 4)
    assert pending["waited_seconds"] == 500
    assert pending["request"] == {"gpu/any": 2000}
    leaf, root = pending["figures"]
    assert leaf == {
        "quota": "team-a", "key": "gpu/any", "request": 2000, "min": 4000, "max": 4000,
        "used": 4000, "available": 0, "capacity": 4000, "short": True,
    }  # fmt: skip
    assert (root["quota"], root["used"], root["available"]) == ("root", 5000, 3000)
    # r1 (started 3000) ends at 4200, r2 (3300) at 4500, b1 (3600, the median of all) at
    # 4200: w1 starts when r1 ends
    estimate = pending["estimate"]
    low, high = estimate.pop("low"), estimate.pop("high")
    assert estimate == {
        "start": _iso(4200), "in_seconds": 600.0, "basis": "simulated", "steps": 2,
        "released": 2,
    }  # fmt: skip
    # the range: when the first of r1 and r2 ends, over futures drawn from their tails
    assert _iso(3600) < low < _iso(4200) < high
    assert pending["runtime"] == {
        "seconds": 600.0, "low_seconds": 520.0, "high_seconds": 1560.0, "scope": "all",
        "name": "", "gpus": None, "jobs": 3, "longer_than": 0.0, "tail_from": None,
        "max_run_seconds": None,
    }  # fmt: skip
    assert "median run time" in pending["estimate_method"]
    assert "percentile start" in pending["estimate_method"]
    table = cli("jobs", "why", "job-w1")
    assert "why pending: WaitingForQuota" in table
    assert "position: 1 of 3 in quota team-a; 2 of 4 in its tree" in table
    assert f"estimated start: {(EPOCH + timedelta(seconds=4200)).isoformat()}" in table
    assert "likely between: " in table


def test_a_workspace_whose_stop_budget_was_crossed_gets_nothing(
    cluster: Narrator, store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    # ws-b may spend 1 USD a month: v's lost run (2 GPUs x 1000 s) and hp's run (4 GPUs x
    # 500 s) cost 2 USD each at 3.60 a GPU-hour; the dispatcher's check stores the crossing
    budgets = tmp_path / "budgets.yaml"
    budgets.write_text(
        "budgets:\n  - {workspace: ws-b, amount: 1, currency: USD, period: month, action: stop}\n"
    )
    cli("budgets", "apply", "--allow-unknown-workspace", str(budgets), "--effective-at", _iso(0))
    tick(store, at(3600))
    assert "ws-b" in cli("budgets", "check", "--at", _iso(3600))
    b2 = json.loads(cli("jobs", "why", "b2", "--format", "json"))["pending"]
    assert b2["reason"] == "BudgetExhausted" and "budget" in b2["reason_text"]
    assert (b2["estimate"]["start"], b2["estimate"]["basis"]) == (None, "budget")
    rows = json.loads(cli("queue", "show", "root", "--format", "json"))
    assert {r["job_uid"]: r["reason"] for r in rows}["b2"] == "BudgetExhausted"
    assert {r["job_uid"]: r["reason"] for r in rows}["w1"] == "WaitingForQuota"


def test_a_workspace_out_of_budget_gets_nothing(
    cluster: Narrator, store: PostgresEventStore, cli: CliCall
) -> None:
    # the budgets' read, as the live loop's gate gives it: ws-a's stop budget is exhausted
    doc = why_job(store, "w1", exhausted=lambda conn, at: frozenset({"ws-a"}))
    assert doc["pending"]["reason"] == "BudgetExhausted"
    assert doc["pending"]["estimate"]["basis"] == "budget"
    assert doc["pending"]["estimate"]["start"] is None


def test_a_job_that_can_never_fit(cluster: Narrator, cli: CliCall) -> None:
    doc = json.loads(cli("jobs", "why", "job-big", "--format", "json"))
    pending = doc["pending"]
    assert pending["reason"] == "ExceedsMaxQuota"
    assert "never fit" in pending["reason_text"]
    assert pending["estimate"]["start"] is None and pending["estimate"]["basis"] == "never"
    leaf = pending["figures"][0]
    assert (leaf["request"], leaf["capacity"], leaf["short"]) == (6000, 4000, True)


def test_a_preempted_job(cluster: Narrator, cli: CliCall) -> None:
    doc = json.loads(cli("jobs", "why", "job-v", "--format", "json"))
    assert doc["answer"] == "finished" and doc["status"] == "Stopped"
    assert doc["admission"]["decided_at"] == _iso(1000)
    (p,) = doc["preemptions"]
    assert (p["preemptor"], p["preemptor_name"], p["preemptor_priority"]) == ("hp", "job-hp", 9)
    assert (p["rule"], p["decided_at"], p["preemptor_quota"]) == (
        "WithinQuota",
        _iso(1990),
        "team-b",
    )
    assert "same quota" in p["rule_text"]
    assert p["state"] == {"team-b": {"gpu/any.used": 4000, "gpu/any.min": 4000}}
    # 2 GPUs from 1000 to 2000: 2000 GPU-seconds; at 3.60 USD per GPU-hour, 2.00 USD
    assert p["lost_seconds"] == 1000 and p["lost_gpu_hours"] == pytest.approx(2000 / 3600, abs=1e-6)
    assert (p["lost_cost_minor"], p["lost_cost"], p["currency"]) == (200, "2.00", "USD")
    table = cli("jobs", "why", "v")
    assert "preempted" in table and "job-hp" in table and "2.00" in table
    # a running job: admitted by the dispatcher, 600 s in; only the 1800 s job ran longer
    # (too few): the tail from 600 s, median 1200 s, ending (as estimates assume) at 4200
    r1 = json.loads(cli("jobs", "why", "r1", "--format", "json"))
    assert (r1["answer"], r1["admission"]["decided_at"]) == ("running", _iso(3000))
    assert r1["projected_end"] == _iso(4200)
    assert r1["runtime"] == {
        "seconds": 1200.0, "low_seconds": pytest.approx(600 / 0.9),
        "high_seconds": pytest.approx(6000), "scope": "tail", "name": "", "gpus": None,
        "jobs": 0, "longer_than": 600.0, "tail_from": 600.0, "max_run_seconds": None,
    }  # fmt: skip
    # the preemptor's own why: it ran, admitted by the dispatcher
    hp = json.loads(cli("jobs", "why", "hp", "--format", "json"))
    assert hp["answer"] == "finished" and hp["preemptions"] == []
    assert hp["admission"]["quota"] == "team-b"
    # both decisions are on the victim's timeline
    shown = json.loads(cli("jobs", "show", "v", "--format", "json"))["timeline"]
    kinds = [t["type"] for t in shown]
    assert "AdmissionDecided" in kinds and "PreemptionDecided" in kinds


def test_queue_show_lists_in_order_with_estimates(
    cluster: Narrator, store: PostgresEventStore, cli: CliCall
) -> None:
    rows = json.loads(cli("queue", "show", "team-a", "--format", "json"))
    assert [(r["job_uid"], r["position"], r["cohort_position"], r["reason"]) for r in rows] == [
        ("w1", 1, 2, "WaitingForQuota"),
        ("big", 2, 3, "ExceedsMaxQuota"),
        ("w2", 3, 4, "WaitingForQuota"),
    ]
    # w1 starts when r1 ends (3000 + 1200); then big, which can never fit, heads team-a's
    # StrictFIFO queue and is retried there, never skipped (on_unfit_head: Retry): w2 waits
    assert [r["estimated_start"] for r in rows] == [_plain(4200), None, None]
    assert rows[0]["estimated_start_low"] < _plain(4200) < rows[0]["estimated_start_high"]
    assert rows[1]["estimated_start_low"] is None
    # with on_unfit_head: Skip the queue passes big: w2 starts when r2 ends (3300 + 1200)
    skip = TREE.replace(
        "queue_policy: StrictFIFO", "queue_policy: StrictFIFO\n    on_unfit_head: Skip"
    )
    apply_quota_file(store, skip, principal="api/test", at=at(3600))
    Projector(store, all_projections()).catch_up()
    rows = json.loads(cli("queue", "show", "team-a", "--format", "json"))
    assert [r["estimated_start"] for r in rows] == [_plain(4200), None, _plain(4500)]
    # the whole tree from its root, a page at a time
    first = cli("queue", "show", "root", "--limit", "2", "--format", "csv")
    assert [line.split(",")[2] for line in first.splitlines()[1:]] == ["b2", "w1"]
    first_page = queue_page(store, "root", limit=2)
    second = queue_page(store, "root", limit=2, cursor=first_page.next_cursor)
    assert [r["job_uid"] for r in second.rows] == ["big", "w2"] and second.next_cursor is None
    page = json.loads(cli("queue", "show", "root", "--format", "json"))
    assert [r["job_uid"] for r in page] == ["b2", "w1", "big", "w2"]
    # b2 waits for b1 (started 3600, the median of all three finished jobs: 600 s);
    # team-b's BestEffortFIFO parks a head that does not fit
    assert (page[0]["reason"], page[0]["estimated_start"]) == ("Parked", _plain(4200))
    b2 = json.loads(cli("jobs", "why", "b2", "--format", "json"))["pending"]
    assert b2["reason"] == "Parked" and "BestEffortFIFO" in b2["reason_text"]
    assert b2["estimate"]["start"] == _iso(4200)
    assert "unknown quota" in cli("queue", "show", "nowhere", ok=False)
    assert "no job with uid or name" in cli("jobs", "why", "nobody", ok=False)
    assert cli("queue", "show", "team-b", "--at", _iso(3600)).count("job-b2") == 1


def test_report_estimates_from_stored_decisions(
    cluster: Narrator, store: PostgresEventStore, cli: CliCall
) -> None:
    n = Narrator("later")
    # (job, estimate, its range, actual start): inside, below and above the range
    for uid, estimate, (low, high), actual in (
        ("w1", 4200, (4250, 4400), 4300),
        ("w2", 4500, (4450, 4600), 4400),
        ("b2", 4800, (4700, 5000), 5400),
    ):
        quota = "team-b" if uid == "b2" else "team-a"
        n.tell(
            AdmissionDecided(
                job_uid=uid,
                quota=quota,
                outcome="pending",
                reason="WaitingForQuota",
                estimated_start=at(estimate),
                estimated_start_low=at(low),
                estimated_start_high=at(high),
            ),
            f"quota/{quota}",
            at(3600),
            source="dispatcher",
        )
        # a later, better estimate does not replace the first one
        n.tell(
            AdmissionDecided(
                job_uid=uid,
                quota=quota,
                outcome="pending",
                reason="Parked",
                estimated_start=at(actual),
            ),
            f"quota/{quota}",
            at(3700),
            source="dispatcher",
        )
        _admit_decision(n, uid, quota, actual)
    n.tell(
        AdmissionDecided(
            job_uid="big", quota="team-a", outcome="pending", reason="ExceedsMaxQuota"
        ),
        "quota/team-a",
        at(3600),
        source="dispatcher",
    )
    _admit_decision(n, "big", "team-a", 4250)
    store.append(n.events)
    # the timeline shows a pending decision's reason and estimate
    Projector(store, all_projections()).catch_up()
    timeline = json.loads(cli("jobs", "show", "w1", "--format", "json"))["timeline"]
    pending = [t["summary"] for t in timeline if t["type"] == "AdmissionDecided"]
    assert pending[0] == (
        "admission decision: pending in quota team-a: WaitingForQuota, "
        f"estimated start {_iso(4200)}, likely {_iso(4250)} to {_iso(4400)}"
    )
    rows = json.loads(cli("report", "estimates", "--format", "json"))
    # errors: w1 +100, w2 -100, b2 +600; big waited with no estimate (admitted at 4250
    # after a quota change, say)
    # ranges: w1 inside, w2 below (it started earlier), b2 above (later); big had none
    assert rows == [
        {"quota": "team-a", "waits": 3, "estimated": 2, "p50_abs_error_seconds": 100.0,
         "p95_abs_error_seconds": 100.0, "mean_abs_error_seconds": 100.0,
         "mean_error_seconds": 0.0, "ranged": 2, "inside": 0.5, "below": 0.5, "above": 0.0},
        {"quota": "team-b", "waits": 1, "estimated": 1, "p50_abs_error_seconds": 600.0,
         "p95_abs_error_seconds": 600.0, "mean_abs_error_seconds": 600.0,
         "mean_error_seconds": 600.0, "ranged": 1, "inside": 0.0, "below": 0.0, "above": 1.0},
        {"quota": "(all)", "waits": 4, "estimated": 3, "p50_abs_error_seconds": 100.0,
         "p95_abs_error_seconds": 550.0, "mean_abs_error_seconds": 266.7,
         "mean_error_seconds": 200.0, "ranged": 3, "inside": 0.3333, "below": 0.3333,
         "above": 0.3333},
    ]  # fmt: skip
    with store.reading() as conn:
        assert estimate_coverage(conn) == Coverage(waits=4, ranged=3, inside=1, below=1, above=1)
        assert estimate_coverage(conn, DecisionWindow(start=at(4350))).coverage == 0.0
    per_job = json.loads(cli("report", "estimates", "--per-job", "--format", "json"))
    assert [(r["job_uid"], r["error_seconds"], r["in_range"]) for r in per_job] == [
        ("big", None, None), ("w1", 100.0, "inside"), ("w2", -100.0, "below"),
        ("b2", 600.0, "above"),
    ]  # fmt: skip
    assert (per_job[1]["estimated_start_low"], per_job[1]["estimated_start_high"]) == (
        _plain(4250),
        _plain(4400),
    )
    table = cli("report", "estimates")
    assert "ranged" in table.splitlines()[0] and "inside" in table.splitlines()[0]
    window = cli("report", "estimates", "--per-job", "--from", _iso(4350), "--format", "csv")
    assert [line.split(",")[0] for line in window.splitlines()[1:]] == ["w2", "b2"]
    assert "the window is empty" in cli(
        "report", "estimates", "--from", _iso(10), "--to", _iso(5), ok=False
    )


def test_the_queue_at_an_instant_lists_the_jobs_pending_then(
    cluster: Narrator, store: PostgresEventStore, cli: CliCall
) -> None:
    # q1 (1 GPU) queued at 3700 with team-a full (r1 and r2); r1 ended at 3900 and q1 was
    # admitted then: at 3800 it waited behind w1, big and w2, at 3950 it ran
    n = Narrator("later")
    _submit(n, "q1", 3700, 1000)
    n.tell(
        OccupancyEnded(
            occupancy_id="pod-r1", job_uid="r1", pod_uid="pod-r1", ended_at=at(3900),
            reason="completed",
        ),
        "job/r1",
        at(3900),
    )  # fmt: skip
    n.tell(JobSucceeded(job_uid="r1"), "job/r1", at(3900))
    _admit_decision(n, "q1", "team-a", 3900)
    _run(n, "q1", 3900, 1000)
    store.append(n.events)
    Projector(store, all_projections()).catch_up()
    before = json.loads(cli("queue", "show", "team-a", "--at", _iso(3800), "--format", "json"))
    assert [r["job_uid"] for r in before] == ["w1", "big", "w2", "q1"]
    q1 = before[-1]
    assert (q1["queued_at"], q1["waited_seconds"], q1["reason"]) == (
        _plain(3700), 100.0, "WaitingForQuota"
    )  # fmt: skip
    # the count agrees with the quota tree at that instant
    tree = json.loads(cli("quotas", "tree", "--at", _iso(3800), "--format", "json"))
    team_a = next(r for r in tree if r["quota"] == "team-a" and r["flavor"] == "gpu/any")
    assert team_a["pending_jobs"] == len(before) == 4
    # once admitted it is gone from the queue, at that instant as now
    after = json.loads(cli("queue", "show", "team-a", "--at", _iso(3950), "--format", "json"))
    assert [r["job_uid"] for r in after] == ["w1", "big", "w2"]
    now = json.loads(cli("queue", "show", "team-a", "--format", "json"))
    assert [r["job_uid"] for r in now] == ["w1", "big", "w2"]
    # at 3250 team-b held nothing (b1, which holds it now, was submitted at 3500): b2 fitted
    assert queue_page(store, "team-b", at=at(3250)).rows == []
    # jobs why at the instant: q1 waited then, runs later
    then = json.loads(cli("jobs", "why", "q1", "--at", _iso(3800), "--format", "json"))
    assert (then["answer"], then["status"]) == ("pending", "Queuing")
    assert then["pending"]["reason"] == "WaitingForQuota"
    later = json.loads(cli("jobs", "why", "q1", "--at", _iso(3950), "--format", "json"))
    assert (later["answer"], later["status"]) == ("running", "Running")
    # a job not yet submitted at the instant is not explained as it is now
    assert "did not exist" in cli("jobs", "why", "b1", "--at", _iso(3250), ok=False)


def test_a_preemption_read_at_instants_around_it(
    cluster: Narrator, store: PostgresEventStore
) -> None:
    # v ran in team-b from 1000; hp (all of team-b) queued at 1980, the preemption was
    # decided at 1990, v seen preempted at 1995, its pod gone at 2000 (hp admitted then),
    # v deleted at 2100
    def story(t: float) -> tuple[list[tuple[str, str]], str, str, str, str]:
        queue = [(r["job_uid"], r["reason"]) for r in queue_page(store, "team-b", at=at(t)).rows]
        v, hp = why_job(store, "v", at=at(t)), why_job(store, "hp", at=at(t))
        return queue, v["answer"], v["status"], hp["answer"], hp["status"]

    assert story(1992) == (
        [("hp", "PreemptionPending")], "running", "Running", "pending", "Queuing"
    )  # fmt: skip
    assert story(1997) == (
        [("hp", "PreemptionPending")], "preempted", "Preempted", "pending", "Queuing"
    )  # fmt: skip
    # its pods gone, v waits again in its next episode (its first preemption counted)
    assert story(2050) == ([("v", "Parked")], "pending", "Preempted", "running", "Running")
    assert "preempted before" in why_job(store, "v", at=at(2050))["summary"]
    # deleted by then: not queued any more
    assert story(2150) == ([], "finished", "Stopped", "running", "Running")
