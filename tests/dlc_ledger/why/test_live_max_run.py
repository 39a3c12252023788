"""A job's declared maximum run time through the live loop (kubesim, the official client, the
real watcher, real PostgreSQL): the watcher carries the annotation into ``JobSubmitted``, a
job waiting behind it is estimated to start at that maximum, and the dispatcher stops it at
the first cycle once it has run that long (``MaxRunTimeExceeded``): the job fails
``DeadlineExceeded``, is never queued again, and ``jobs why`` and its timeline say so."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from kubesim import BATCH_JOBS
from kubesim.objects import job_object
from projections.registry import catch_up_all
from tests.support.clis import CliCall
from tests.support.live import Live

MAX_RUN = 300


def _submit_with_maximum(live: Live, name: str, gpus: int, max_run: int) -> str:
    job = job_object(
        name,
        "ns1",
        labels={"dlc.ledger/workspace": "ws-a", "dlc.ledger/billing-mode": "public"},
        annotations={"dlc.ledger/max-run-seconds": str(max_run)},
        cpu_milli=1000,
        memory_mib=512,
        gpus=gpus,
        priority=0,
    )
    job["spec"]["suspend"] = True
    return str(live.sim.cluster.create(BATCH_JOBS, job)["metadata"]["uid"])


def _stops(live: Live) -> list[dict[str, object]]:
    return [
        {"at": d.occurred_at, **d.data}
        for d in live.decisions()
        if d.type == "AdmissionDecided" and d.data["outcome"] == "stop"
    ]


def test_a_job_past_its_maximum_run_time_is_stopped_at_the_right_cycle(
    live: Live, cli: CliCall
) -> None:
    t1 = _submit_with_maximum(live, "t1", 2, MAX_RUN)
    started, base = live.sim.clock.now(), live.sim.clock.seconds()
    live.dispatcher.cycle()  # admitted and resumed at once
    live.sim.advance(1)
    live.dispatcher.cycle()
    assert live.status(t1) == "Running"
    (submitted,) = live.store.read_by_type(["JobSubmitted"])
    assert submitted.data["max_run_seconds"] == MAX_RUN

    # t2 needs the whole tree: it waits for t1, whose run nothing else bounds (no job has
    # finished) but its maximum: t2 is estimated to start then, and no later
    t2 = live.submit("t2", "ws-a", 4)
    live.dispatcher.cycle()
    (pending,) = [
        d
        for d in live.decisions()
        if d.data.get("job_uid") == t2 and d.data["outcome"] == "pending"
    ]
    deadline = started + timedelta(seconds=MAX_RUN)
    assert datetime.fromisoformat(pending.data["estimated_start"]) == deadline
    assert datetime.fromisoformat(pending.data["estimated_start_high"]) == deadline

    live.sim.advance_to(base + MAX_RUN - 1)  # 299 s in: not yet
    outcome = live.dispatcher.cycle()
    assert outcome.max_run_stopped == () and _stops(live) == []
    assert not live.suspended("t1")
    live.sim.advance_to(base + MAX_RUN)  # 300 s in: this cycle stops it
    outcome = live.dispatcher.cycle()
    assert outcome.max_run_stopped == (t1,) and outcome.suspended == ()
    assert "max-run stopped 1" in outcome.summary()
    (stop,) = _stops(live)
    assert stop["at"] == deadline and stop["job_uid"] == t1
    assert stop["reason"] == "MaxRunTimeExceeded" and stop["quota"] == "team-a"
    assert stop["state"]["run"] == {"ran_seconds": MAX_RUN, "max_run_seconds": MAX_RUN}  # type: ignore[index]
    job = live.sim.store.get(BATCH_JOBS, "ns1", "t1")
    assert job["spec"]["activeDeadlineSeconds"] == MAX_RUN
    assert not job["spec"]["suspend"]  # stopped for good, not suspended

    # its pod releases over its grace period; the stop is decided once, t1 never queues again
    for _ in range(4):
        live.sim.advance(10)
        live.dispatcher.cycle()
    assert live.status(t1) == "Failed"
    assert len(_stops(live)) == 1
    admits = [d for d in live.decisions() if d.data["outcome"] == "admit"]
    assert [d.data["job_uid"] for d in admits] == [t1, t2]  # t2 runs where t1 ran

    catch_up_all(live.store)
    why = json.loads(cli("jobs", "why", "t1", "--format", "json"))
    assert (why["answer"], why["status"]) == ("finished", "Failed")
    assert why["stopped"]["reason"] == "MaxRunTimeExceeded"
    assert why["stopped"]["max_run_seconds"] == MAX_RUN
    assert "MaxRunTimeExceeded" in why["summary"]
    assert "stopped: " in cli("jobs", "why", "t1")
    timeline = json.loads(cli("jobs", "show", "t1", "--format", "json"))["timeline"]
    summaries = [t["summary"] for t in timeline]
    assert f"stop decision: MaxRunTimeExceeded (ran {MAX_RUN} s, maximum {MAX_RUN} s)" in (
        summaries
    )
    assert any(s.startswith("failed") and "DeadlineExceeded" in s for s in summaries)
