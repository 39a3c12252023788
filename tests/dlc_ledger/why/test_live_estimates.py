"""``jobs why`` over what the live loop decided (kubesim, the official client, the real
watcher, real PostgreSQL): the estimated start stored with each pending decision is the one
``jobs why`` shows and ``report estimates`` measures; a preempted job says by whom, why,
and what it lost."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import select

from kubesim import BATCH_JOBS
from projections.inventory.occupancy import occupancy
from projections.jobs.tables import job_state
from projections.registry import catch_up_all
from tests.support.clis import CliCall
from tests.support.live import Live
from tests.support.watchers import terminate


def _finish(live: Live, name: str) -> None:
    job = live.sim.store.get(BATCH_JOBS, "ns1", name)
    for pod in live.sim.cluster.owned_pods(job["metadata"]["uid"]):
        terminate(live.sim, pod)
    live.sim.cluster.finish_job("ns1", name, failed=False)


def _state(live: Live, uid: str) -> tuple[int, dict[str, str]]:
    with live.store.engine.connect() as conn:
        row = conn.execute(
            select(job_state.c.running_us, job_state.c.entered).where(job_state.c.job_uid == uid)
        ).one()
    return int(row.running_us), dict(row.entered)


def test_a_pending_decision_carries_the_estimate_jobs_why_shows(live: Live, cli: CliCall) -> None:
    # history: a0 runs 600 s and succeeds (team-a's median run time from then on)
    a0 = live.submit("a0", "ws-a", 4)
    live.dispatcher.cycle()
    live.sim.advance(1)
    live.dispatcher.cycle()
    live.sim.advance(600)
    _finish(live, "a0")
    live.sim.advance(1)
    live.dispatcher.cycle()
    running_us, _ = _state(live, a0)
    assert live.status(a0) == "Succeeded" and running_us > 0
    # a1 takes the whole tree; a2 waits for it
    a1 = live.submit("a1", "ws-a", 4)
    live.dispatcher.cycle()
    live.sim.advance(5)
    a2 = live.submit("a2", "ws-a", 2)
    live.dispatcher.cycle()
    _, entered = _state(live, a1)
    admitted_at = datetime.fromisoformat(entered["Admitted"])
    # a1 has run 5 s; a0 alone (1 of the 5 a class needs) is too few to say more than a heavy
    # tail from a typical run, a0's: P(run > x) = a0 / x, median 2 a0
    expected = admitted_at + 2 * timedelta(microseconds=running_us)
    (pending,) = [
        d
        for d in live.decisions()
        if d.data.get("job_uid") == a2 and d.data["outcome"] == "pending"
    ]
    stored = datetime.fromisoformat(pending.data["estimated_start"])
    assert abs(stored - expected) < timedelta(milliseconds=1)
    low = datetime.fromisoformat(pending.data["estimated_start_low"])
    high = datetime.fromisoformat(pending.data["estimated_start_high"])
    assert low < stored < high
    catch_up_all(live.store)  # the cycle's decisions: reads never project, the projector does
    why = json.loads(cli("jobs", "why", a2, "--format", "json"))["pending"]
    assert datetime.fromisoformat(why["estimate"]["start"]) == stored
    assert why["last_decision"]["estimated_start"] == pending.data["estimated_start"]
    assert why["last_decision"]["estimated_start_high"] == pending.data["estimated_start_high"]
    assert why["runtime"]["scope"] == "quota" and why["runtime"]["jobs"] == 1

    # a1 ends late (at 1500 s instead of 1200): a2 starts then, after its estimate
    live.sim.advance(1495)
    _finish(live, "a1")
    live.sim.advance(1)
    live.dispatcher.cycle()
    (admit,) = [
        d for d in live.decisions() if d.data.get("job_uid") == a2 and d.data["outcome"] == "admit"
    ]
    catch_up_all(live.store)
    (row,) = json.loads(cli("report", "estimates", "--per-job", "--format", "json"))
    assert row["job_uid"] == a2
    assert row["error_seconds"] == (admit.occurred_at - stored).total_seconds()
    assert row["error_seconds"] > 0
    assert row["in_range"] == ("inside" if admit.occurred_at <= high else "above")


def test_why_a_job_was_preempted_through_the_live_loop(live: Live, cli: CliCall) -> None:
    live.submit("b1", "ws-b", 2)
    live.dispatcher.cycle()
    live.sim.advance(10)
    b2 = live.submit("b2", "ws-b", 2)  # borrows team-a's idle 2 GPUs
    live.dispatcher.cycle()
    live.sim.advance(10)
    live.dispatcher.cycle()
    a1 = live.submit("a1", "ws-a", 2)  # team-a reclaims its min
    live.dispatcher.cycle()
    live.sim.advance(1)
    live.dispatcher.cycle()  # b2's pod has 30 s of grace: still releasing

    releasing = json.loads(cli("jobs", "why", "b2", "--format", "json"))
    assert (releasing["answer"], releasing["status"]) == ("preempted", "Preempted")
    (p,) = releasing["preemptions"]
    assert (p["preemptor"], p["preemptor_name"], p["rule"]) == (a1, "a1", "Reclaim")
    assert p["victim_quota"] == "team-b" and p["preemptor_quota"] == "team-a"
    assert p["state"]["team-b.used"] == {"gpu/any": 4000}
    # its pod started as it was preempted (20 s), and "now" is the latest projected fact
    assert (p["decided_at"], p["lost_seconds"]) == ("2026-11-01T00:00:20Z", 0.0)
    preemptor = json.loads(cli("jobs", "why", "a1", "--format", "json"))["pending"]
    assert preemptor["reason"] == "PreemptionPending"

    live.sim.advance(30)  # the pod is gone: b2 queues again, a1 is admitted
    live.dispatcher.cycle()
    again = json.loads(cli("jobs", "why", "b2", "--format", "json"))
    assert again["answer"] == "pending" and "preempted before" in again["summary"]
    assert again["pending"]["reason"] in ("WaitingForQuota", "Parked")
    (p,) = again["preemptions"]
    with live.store.engine.connect() as conn:
        (start, end) = conn.execute(
            select(occupancy.c.started_at, occupancy.c.ended_at).where(occupancy.c.job_uid == b2)
        ).one()
    lost = (end - start).total_seconds()
    assert p["lost_seconds"] == lost == 30  # bound at 20, 30 s of grace after the suspension
    assert p["lost_gpu_hours"] == round(2 * lost / 3600, 6)
    assert p["currency"] is None  # no price book published: no cost to show
    table = cli("jobs", "why", b2)
    assert "Reclaim: its quota was borrowing" in table
