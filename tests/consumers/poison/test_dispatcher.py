"""The live dispatcher (``dispatch --follow``, ``up``): a job whose decision cannot be built
is left out of the cycle and dead-lettered; the others are decided and acted on.

Poison: a ``JobSubmitted`` stored before its bounds existed (bounds are checked on new
facts only: ``ledger/bounds.py``) asking for 2**60 mGPU in one pod. The jobs projection
folds it (its replicas are JSON) and the dispatcher queues it, but its pending decision
carries the request in its figures (``state["request"]``), beyond the bound of an integer
of a new fact: ``make_envelope`` raises ``OutOfBounds``. Before issue 44 that error left
the cycle before anything was stored or done, and ``run_dispatcher`` retried the whole
cycle forever: no job was ever admitted again.
"""

from __future__ import annotations

import threading
import uuid
from datetime import datetime

import pytest

from consumers.dispatcher import Dispatcher, decisions
from consumers.dispatcher import loop as dispatcher_loop
from consumers.dispatcher.actuator import JobRef
from consumers.dispatcher.decisions import Figures
from consumers.dispatcher.loop import CycleOutcome
from consumers.dispatcher.runner import run_dispatcher
from consumers.projector import Projector
from dlc_ledger.services.quotas import apply_quota_file
from ledger.bounds import OutOfBounds
from ledger.dispatch import Decision
from ledger.envelopes import Envelope
from ledger.events import JobQueued, JobSubmitted, ReplicaSpec
from ledger.store.postgres import PostgresEventStore
from projections.dispatch.reads import DispatchJob
from projections.registry import all_projections
from tests.support.builders import EPOCH, Narrator, at
from tests.support.clis import CliCall
from tests.support.letters import listed_letters

#: 4 GPUs for one workspace
TREE = """
quotas:
  - name: root
    min: {gpu/any: 4000}
  - name: team-a
    parent: root
    min: {gpu/any: 4000}
    workspaces: [ws-a]
"""


class Recorder:
    """An actuator that records its calls (the cluster always agrees)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def resume(self, job: JobRef) -> None:
        self.calls.append(("resume", job.uid))

    def suspend(self, job: JobRef) -> None:
        self.calls.append(("suspend", job.uid))

    def delete_pods(self, job: JobRef) -> None:
        self.calls.append(("delete_pods", job.uid))

    def stop(self, job: JobRef, max_run_seconds: int) -> None:
        self.calls.append(("stop", job.uid))


def _queue(n: Narrator, uid: str, t: float, mgpu: int = 1000) -> Envelope:
    submitted = n.tell(
        JobSubmitted(
            job_uid=uid,
            name=f"job-{uid}",
            namespace="ns",
            workspace="ws-a",
            replicas=(ReplicaSpec(count=1, mgpu=mgpu, cpu_milli=1000, memory_mib=512),),
        ),
        f"job/{uid}",
        at(t),
    )
    n.tell(JobQueued(job_uid=uid), f"job/{uid}", at(t))
    return submitted


def _stored_before_the_bound(base: Envelope, **data: object) -> Envelope:
    """``base`` with ``data`` changed, as a fact stored before its bound existed (the
    envelope's ``data`` is not checked against the catalogue's bounds on append)."""
    fields = base.model_dump(exclude={"data"})
    return Envelope(**{**fields, "event_id": uuid.uuid4(), "data": {**base.data, **data}})


def _world(store: PostgresEventStore) -> Narrator:
    """A queued job asking for 2**60 mGPU (stored before the bound), then a good one."""
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    bad = _queue(n, "bad", 10)
    replica = {**bad.data["replicas"][0], "mgpu": 2**60}
    n.events[0] = _stored_before_the_bound(bad, replicas=[replica])
    _queue(n, "good", 20)
    store.append(n.events)
    return n


def _dispatcher(store: PostgresEventStore, actuator: Recorder, now: list[datetime]) -> Dispatcher:
    return Dispatcher(
        store,
        actuator,
        clock=lambda: now[0],
        refresh=lambda: _project(store),
    )


def _project(store: PostgresEventStore) -> None:
    Projector(store, all_projections()).catch_up()


def _run(dispatcher: Dispatcher, store: PostgresEventStore) -> list[CycleOutcome]:
    """One cycle as ``dispatch`` runs it (a failing single cycle raises)."""
    outcomes: list[CycleOutcome] = []
    run_dispatcher(
        dispatcher,
        store,
        follow=False,
        interval=0,
        stop=threading.Event(),
        on_cycle=outcomes.append,
    )
    return outcomes


def _decided(store: PostgresEventStore) -> list[tuple[str, str]]:
    return [
        (str(e.data["job_uid"]), str(e.data["outcome"]))
        for e in store.read_by_type(["AdmissionDecided"])
    ]


def test_a_job_whose_decision_cannot_be_built_is_dead_lettered_and_the_cycle_goes_on(
    store: PostgresEventStore, cli: CliCall
) -> None:
    _world(store)
    actuator = Recorder()
    now = [at(100)]
    dispatcher = _dispatcher(store, actuator, now)

    [outcome] = _run(dispatcher, store)
    # the good job is admitted and resumed; the poison one is left out of the cycle
    assert outcome.admitted == ("good",)
    assert outcome.quarantined == ("bad",)
    assert actuator.calls == [("resume", "good")]
    assert _decided(store) == [("good", "admit")]
    letters = listed_letters(cli)
    assert [(r["source"], r["reason"], r["count"]) for r in letters] == [
        ("dispatcher/decision", "decision-failed", 1)
    ]
    assert "bad" in str(letters[0]["error"]) and "OutOfBounds" in str(letters[0]["error"])

    # the process goes on: a job queued later is admitted by the next cycle, and the
    # poison one is looked at again (the letter is seen again)
    more = Narrator("later")
    _queue(more, "next", 150)
    store.append(more.events)
    now[0] = at(200)
    [outcome] = _run(dispatcher, store)
    assert outcome.admitted == ("next",)
    assert ("resume", "next") in actuator.calls
    assert [r["count"] for r in listed_letters(cli)] == [2]
    assert ("bad", "pending") not in _decided(store)

    # requeue (the next cycle looks at it again) or discard
    assert "tried again" in cli("dead-letters", "retry", str(letters[0]["id"]))
    assert listed_letters(cli) == []


def test_an_admission_that_cannot_be_stored_is_not_carried_out(
    store: PostgresEventStore, cli: CliCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admission whose event cannot be built is neither stored nor resumed (a resume
    without its decision would run a job the read models say waits)."""
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    n = Narrator()
    _queue(n, "one", 10)
    _queue(n, "two", 20)
    store.append(n.events)

    def admission_event(
        decision: Decision, job: DispatchJob, figures: Figures, now: datetime
    ) -> Envelope:
        if job.uid == "one":
            raise OutOfBounds("AdmissionDecided: state: out of bounds")
        return decisions.admission_event(decision, job, figures, now)

    monkeypatch.setattr(dispatcher_loop, "admission_event", admission_event)
    actuator = Recorder()
    [outcome] = _run(_dispatcher(store, actuator, [at(100)]), store)
    assert outcome.admitted == ("two",)
    assert actuator.calls == [("resume", "two")]
    assert _decided(store) == [("two", "admit")]
    assert [(r["source"], r["reason"]) for r in listed_letters(cli)] == [
        ("dispatcher/decision", "decision-failed")
    ]


def test_a_bug_still_fails_the_cycle(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the item's faults are quarantined: anything else fails the cycle as before."""
    _world(store)

    def broken(*args: object, **kw: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(dispatcher_loop, "pending_event", broken)
    with pytest.raises(KeyError):
        _run(_dispatcher(store, Recorder(), [at(100)]), store)
