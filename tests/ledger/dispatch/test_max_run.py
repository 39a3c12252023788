"""A job's declared maximum run time from plain data: the annotation the watcher reads, the
optional fields that leave older events' bytes alone, which running jobs the dispatcher
stops (``ledger.dispatch.timeouts``) and the decision it stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from consumers.dispatcher.decisions import Figures, stop_event
from consumers.watchers.event_factory import EventFactory
from consumers.watchers.facts import job_facts
from consumers.watchers.labels import max_run_seconds
from kubesim.objects import job_object
from ledger.canonical import canonical_json
from ledger.dispatch import Admitted, CycleInput, QuotaNode
from ledger.dispatch.timeouts import MAX_RUN_REASON, Overrun, overruns
from ledger.events import MAX_RUN_SECONDS, AdmissionDecided, JobSubmitted
from projections.dispatch.reads import DispatchJob

T = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _running(job: str, ran: float, quota: str = "a") -> Admitted:
    return Admitted(job, quota, 0, {"gpu": 1000}, T - timedelta(seconds=ran))


def test_a_job_that_has_run_its_maximum_is_stopped_one_short_of_it_is_not() -> None:
    running = [_running("b", 299.5), _running("a", 300), _running("c", 10_000), _running("d", 7)]
    limits = {"a": 300, "b": 300, "d": 5}
    assert overruns(running, limits, T) == (
        Overrun("a", "a", 300.0, 300),
        Overrun("d", "a", 7.0, 5),
    )  # c declared none: it runs as long as it runs
    assert overruns(running, {}, T) == ()


def test_the_annotation_is_whole_seconds_up_to_a_year() -> None:
    assert max_run_seconds({"dlc.ledger/max-run-seconds": "3600"}) == 3600
    assert max_run_seconds({"dlc.ledger/max-run-seconds": " 60 "}) == 60
    for bad in ("", "1h", "0", "-5", "1.5", str(MAX_RUN_SECONDS + 1)):
        assert max_run_seconds({"dlc.ledger/max-run-seconds": bad}) is None
    assert max_run_seconds({}) is None


def test_the_watcher_carries_it_into_the_submitted_fact() -> None:
    def submitted(annotations: dict[str, str]) -> dict[str, object]:
        obj = job_object(
            "j",
            "ns",
            labels={"dlc.ledger/workspace": "ws"},
            annotations=annotations,
            cpu_milli=1000,
            memory_mib=512,
            gpus=1,
            priority=0,
        )
        obj["metadata"].update(uid="u1", creationTimestamp="2026-01-01T12:00:00Z")
        return EventFactory("c1").job_submitted(job_facts(obj), T).data

    assert submitted({"dlc.ledger/max-run-seconds": "7200"})["max_run_seconds"] == 7200
    # without one the payload is what it always was: no key, the same bytes and hash
    plain = submitted({})
    assert "max_run_seconds" not in plain
    assert canonical_json(plain) == canonical_json(
        JobSubmitted.model_validate(plain).model_dump(mode="json")
    )


def test_a_decision_without_a_range_keeps_its_old_payload() -> None:
    old = AdmissionDecided(job_uid="j", quota="a", outcome="pending", estimated_start=T)
    dumped = old.model_dump(mode="json")
    assert "estimated_start_low" not in dumped and "estimated_start_high" not in dumped
    assert "estimated_start" in dumped  # stored (even null) before ranges existed
    ranged = AdmissionDecided(
        job_uid="j",
        quota="a",
        outcome="pending",
        estimated_start=T,
        estimated_start_low=T - timedelta(hours=1),
    ).model_dump(mode="json")
    assert ranged["estimated_start_low"] and "estimated_start_high" not in ranged


def test_the_stop_decision_says_why_and_is_stored_once_per_episode() -> None:
    cycle = CycleInput(
        (QuotaNode("root"), QuotaNode("a", "root", {"gpu": 4000})),
        (_running("a1", 400),),
        (),
        T,
    )
    job = DispatchJob(
        uid="a1",
        name="job-a1",
        namespace="ns",
        kind="Job",
        status="Running",
        attempt=1,
        quota="a",
        workspace="ws",
        billing_mode="public",
        priority=0,
        resources={"gpu": 1000},
        since=T - timedelta(seconds=400),
        occupying=True,
        pending=False,
    )
    (over,) = overruns(cycle.admitted, {"a1": 300}, T)
    envelope = stop_event(over, job, Figures(cycle), T)
    data = envelope.data
    assert (data["outcome"], data["reason"], data["attempt"]) == ("stop", MAX_RUN_REASON, 1)
    assert data["state"]["run"] == {"ran_seconds": 400, "max_run_seconds": 300}
    assert data["state"]["a.used"] == {"gpu": 1000}
    assert envelope.stream == "dispatch/a1" and envelope.source == "dispatcher"
    later = stop_event(over, job, Figures(cycle), T + timedelta(seconds=10))
    assert later.event_id == envelope.event_id  # a repeated cycle stores nothing new
