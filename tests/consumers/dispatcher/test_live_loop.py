"""The live loop against kubesim with the real client: decisions stored first, then acted
on, retried until the watched state confirms them; never stored twice."""

from __future__ import annotations

from sqlalchemy import text

from kubesim import PYTORCHJOBS, KubeSim
from tests.support.live import Live


def test_admit_resumes_the_job_and_the_watched_state_confirms_it(live: Live) -> None:
    uid = live.submit("a1", "ws-a", 1)
    first = live.dispatcher.cycle()
    assert first.admitted == (uid,) and first.stored == 1 and first.resumed == (uid,)
    assert not live.suspended("a1")
    (decision,) = live.decisions()
    assert decision.type == "AdmissionDecided" and decision.stream == f"dispatch/{uid}"
    assert decision.data["outcome"] == "admit" and decision.data["quota"] == "team-a"
    assert decision.data["state"]["request"] == {"gpu/any": 1000}
    assert decision.source == "dispatcher"

    live.sim.advance(5)
    second = live.dispatcher.cycle()  # the watcher saw it resumed and running: confirmed
    assert live.status(uid) == "Running"
    assert (second.stored, second.resumed, second.unconfirmed) == (0, (), 0)
    assert len(live.decisions()) == 1
    # the job's timeline shows the decision, then the watched facts it led to
    with live.store.engine.connect() as conn:
        timeline = conn.execute(
            text("SELECT type FROM job_timeline WHERE job_uid = :u ORDER BY position"),
            {"u": uid},
        ).scalars()
        assert list(timeline) == ["AdmissionDecided"]  # the job's own facts: its stream
    types = [e.type for e in live.store.read_stream(f"job/{uid}")]
    assert types[:2] == ["JobSubmitted", "JobQueued"] and "JobAdmitted" in types


def test_preempt_suspends_the_victim_then_admits_the_preemptor_later(live: Live) -> None:
    b1 = live.submit("b1", "ws-b", 2)
    live.dispatcher.cycle()
    live.sim.advance(10)
    b2 = live.submit("b2", "ws-b", 2)  # borrows team-a's idle 2 GPUs
    assert live.dispatcher.cycle().admitted == (b2,)
    live.sim.advance(10)
    assert live.status(b2) == "Running" or live.dispatcher.cycle().stored == 0

    a1 = live.submit("a1", "ws-a", 2)  # team-a reclaims its min
    preempting = live.dispatcher.cycle()
    assert preempting.preemptions == ((a1, (b2,)),)
    assert preempting.admitted == () and preempting.suspended == (b2,)
    assert live.suspended("b2") and not live.suspended("b1")
    (decided,) = [d for d in live.decisions() if d.type == "PreemptionDecided"]
    assert decided.data["preemptor"] == a1 and decided.data["reason"] == "Reclaim"
    assert decided.data["victims"] == [
        {"job_uid": b2, "quota": "team-b", "reason": "Reclaim", "attempt": 0}
    ]
    assert decided.data["state"]["team-b.used"] == {"gpu/any": 4000}

    # the victim's pod has 30 s of grace: still occupying, suspended again, a1 waits
    live.sim.advance(1)
    waiting = live.dispatcher.cycle()
    assert live.status(b2) == "Preempted"
    assert waiting.admitted == () and waiting.suspended == (b2,)
    assert [s.reason for s in waiting.result.pending if s.job == a1] == ["PreemptionPending"]
    assert waiting.preemptions == ()  # a releasing victim is not chosen again

    live.sim.advance(30)  # the pod is gone: b2 queues again, a1 is admitted
    later = live.dispatcher.cycle()
    assert later.admitted == (a1,) and later.resumed == (a1,)
    assert [s.job for s in later.result.pending] == [b2]
    live.sim.advance(1)
    live.dispatcher.cycle()
    assert (live.status(a1), live.status(b1), live.status(b2)) == (
        "Running",
        "Running",
        "Preempted",
    )
    assert not live.suspended("a1") and live.suspended("b2")
    assert len([d for d in live.decisions() if d.type == "PreemptionDecided"]) == 1


def test_a_failed_patch_is_retried_next_cycle_and_stored_once(live: Live, sim: KubeSim) -> None:
    uid = live.submit("a1", "ws-a", 1)
    live.project()
    live.dispatcher.refresh = None  # nothing between the failure and the next request
    sim.fail_next_requests(1, status=500)
    failed = live.dispatcher.cycle()
    assert failed.stored == 1 and failed.resumed == () and len(failed.failures) == 1
    assert "HTTP 500" in failed.failures[0]
    assert live.suspended("a1")

    live.project()  # the job still queues: the admission is not confirmed
    retried = live.dispatcher.cycle()
    assert retried.stored == 0 and retried.resumed == (uid,) and retried.failures == ()
    assert not live.suspended("a1")
    live.project()
    assert live.status(uid) == "Running"
    assert len(live.decisions()) == 1


def test_a_cycle_run_twice_stores_no_duplicate_decision(live: Live) -> None:
    live.submit("a1", "ws-a", 1)
    live.submit("a2", "ws-a", 2)  # team-a's 2 GPUs minus a1's... borrows team-b's
    live.submit("b1", "ws-b", 4)  # can never fit beside them: a pending decision
    live.project()
    now = live.sim.clock.now()
    first = live.new_dispatcher(refresh=None).cycle(now)
    # a restarted dispatcher that finds the read model not yet projected decides again:
    # the same ids, nothing new stored
    again = live.new_dispatcher(refresh=None).cycle(now)
    assert first.stored >= 3 and again.stored == 0
    assert again.admitted == first.admitted
    ids = [d.event_id for d in live.decisions()]
    assert len(ids) == len(set(ids)) == first.stored
    # once projected, the reason unchanged: no new pending decision either
    live.project()
    assert live.new_dispatcher(refresh=None).cycle(now).stored == 0


def test_an_idle_mode_victim_loses_its_pods_at_once(live: Live) -> None:
    b1 = live.submit("b1", "ws-b", 2)
    live.dispatcher.cycle()
    live.sim.advance(10)
    idle = live.submit("idle", "ws-b", 2, billing="idle")  # borrowed idle capacity
    assert live.dispatcher.cycle().admitted == (idle,)
    live.sim.advance(10)
    a1 = live.submit("a1", "ws-a", 2)
    live.sim.advance(1)  # decided after a1 queued: the victim requeues behind it
    preempting = live.dispatcher.cycle()
    assert preempting.preemptions == ((a1, (idle,)),)
    at = live.sim.clock.now()

    # no grace period to wait for: the next cycle admits the preemptor
    live.sim.advance(1)
    assert live.dispatcher.cycle().admitted == (a1,)
    (ended,) = [e for e in live.store.read_stream(f"job/{idle}") if e.type == "OccupancyEnded"]
    assert ended.data["reason"] == "preempted" and ended.data["ended_at"] == at.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert live.status(idle) == "Preempted" and live.status(b1) == "Running"


def test_a_kubeflow_job_is_resumed_through_its_run_policy(live: Live) -> None:
    template = {
        "metadata": {"labels": {"dlc.ledger/workspace": "ws-a"}},
        "spec": {
            "containers": [{"name": "pytorch", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
        },
    }
    created = live.sim.cluster.create(
        PYTORCHJOBS,
        {
            "metadata": {"name": "bert", "namespace": "nlp"},
            "spec": {
                "runPolicy": {"suspend": True},
                "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": template}},
            },
        },
    )
    uid = created["metadata"]["uid"]
    first = live.dispatcher.cycle()
    assert first.admitted == (uid,) and first.resumed == (uid,)
    stored = live.sim.store.get(PYTORCHJOBS, "nlp", "bert")
    assert stored["spec"]["runPolicy"]["suspend"] is False
    (decision,) = live.decisions()
    assert decision.data["state"]["request"] == {"gpu/any": 2000}  # two workers
    live.sim.advance(1)
    again = live.dispatcher.cycle()
    assert live.status(uid) == "Admitted"  # the watcher saw Suspended=False
    assert again.resumed == () and again.unconfirmed == 0
