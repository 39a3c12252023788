"""Which of two facts at one cluster instant takes effect first, pinned pair by pair.

``test_fold_order`` proves a job's state does not depend on store order; it would pass
just as well with two lifecycle ranks swapped (a pod's release ranked before its start,
say), since any consistent order is order-independent. Here every pair of kinds with
different ranks is stored at one instant, in both store orders, and must come out as the
table below says: the earlier kind first in the job's timeline and the later one folded
last, with the job's status path and open pods the fold then implies. The table is
written out, not computed from the ranks, so a swapped rank fails its rows.

Each row starts from a ``preamble`` at second 0 chosen so the two folds differ where the
state machine lets them: ``submitted`` (the job submitted), ``running`` (and pod ``p0``
bound), ``stopping`` (and stopped while ``p0`` still runs), ``none`` (the pair submits
the job). In the pair, a pod start binds ``p1`` and a pod release frees ``p0``. Rows
marked "either way" fold to the same state in both orders (a submission changes no
status; a start is a no-op where a release matters); their order shows in the timeline
and in which fact the job is folded to. Decisions (``AdmissionDecided``,
``PreemptionDecided``) are not folded: their rank orders the timeline only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from sqlalchemy import select

from consumers.projector import Projector
from ledger.envelopes import EventData
from ledger.events import (
    AdmissionDecided,
    JobAdmitted,
    JobDeleted,
    JobFailed,
    JobPreempted,
    JobQueued,
    JobRestarted,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    OccupancyEnded,
    OccupancyStarted,
    PreemptionDecided,
    Victim,
)
from ledger.store.postgres import PostgresEventStore
from projections.jobs import JobsProjection, timeline_rows
from projections.jobs.fold import _RANK, Fact, fold_facts
from projections.jobs.tables import job_state
from tests.support.builders import Narrator, at, replica
from tests.support.databases import TemplateDatabases


class Pair(NamedTuple):
    earlier: str  # takes effect first at the shared instant
    later: str
    preamble: str
    path: str  # the statuses the job entered, in order
    pods: str  # its open occupancies afterwards


# fmt: off
PAIRS = [
    Pair("JobSubmitted", "JobQueued", "none", "Creating > Queuing", ""),  # either way
    Pair("JobSubmitted", "JobAdmitted", "none", "Creating > Admitted", ""),  # either way
    Pair("JobSubmitted", "AdmissionDecided", "none", "Creating", ""),  # either way
    Pair("JobSubmitted", "JobStarted", "none", "Creating > Running", ""),  # either way
    Pair("JobSubmitted", "OccupancyStarted", "none", "Creating > Running", "p1"),  # either way
    Pair("JobSubmitted", "OccupancyEnded", "none", "Creating", ""),  # either way
    Pair("JobSubmitted", "PreemptionDecided", "none", "Creating", ""),  # either way
    Pair("JobSubmitted", "JobRestarted", "none", "Creating > Restarting", ""),  # either way
    Pair("JobSubmitted", "JobPreempted", "none", "Creating > Preempted", ""),  # either way
    Pair("JobSubmitted", "JobSucceeded", "none", "Creating > Succeeded", ""),  # either way
    Pair("JobSubmitted", "JobFailed", "none", "Creating > Failed", ""),  # either way
    Pair("JobSubmitted", "JobStopped", "none", "Creating > Stopped", ""),  # either way
    Pair("JobSubmitted", "JobDeleted", "none", "Creating > Stopped", ""),  # either way
    Pair("JobQueued", "JobAdmitted", "submitted", "Creating > Queuing > Admitted", ""),
    Pair("JobQueued", "AdmissionDecided", "submitted", "Creating > Queuing", ""),  # either way
    Pair("JobQueued", "JobStarted", "submitted", "Creating > Queuing > Running", ""),
    Pair("JobQueued", "OccupancyStarted", "submitted", "Creating > Queuing > Running", "p1"),
    Pair("JobQueued", "OccupancyEnded", "stopping",
         "Creating > Running > Stopping > Queuing", ""),
    Pair("JobQueued", "PreemptionDecided", "submitted", "Creating > Queuing", ""),  # either way
    Pair("JobQueued", "JobRestarted", "submitted", "Creating > Queuing > Restarting", ""),
    Pair("JobQueued", "JobPreempted", "submitted", "Creating > Queuing > Preempted", ""),
    Pair("JobQueued", "JobSucceeded", "submitted", "Creating > Queuing > Succeeded", ""),
    Pair("JobQueued", "JobFailed", "submitted", "Creating > Queuing > Failed", ""),
    Pair("JobQueued", "JobStopped", "submitted", "Creating > Queuing > Stopped", ""),
    Pair("JobQueued", "JobDeleted", "submitted", "Creating > Queuing > Stopped", ""),
    Pair("JobAdmitted", "JobStarted", "submitted", "Creating > Admitted > Running", ""),
    Pair("JobAdmitted", "OccupancyStarted", "submitted", "Creating > Admitted > Running", "p1"),
    Pair("JobAdmitted", "OccupancyEnded", "stopping",
         "Creating > Running > Stopping > Admitted", ""),
    Pair("JobAdmitted", "PreemptionDecided", "submitted", "Creating > Admitted", ""),  # either way
    Pair("JobAdmitted", "JobRestarted", "submitted", "Creating > Admitted > Restarting", ""),
    Pair("JobAdmitted", "JobPreempted", "submitted", "Creating > Admitted > Preempted", ""),
    Pair("JobAdmitted", "JobSucceeded", "submitted", "Creating > Admitted > Succeeded", ""),
    Pair("JobAdmitted", "JobFailed", "submitted", "Creating > Admitted > Failed", ""),
    Pair("JobAdmitted", "JobStopped", "submitted", "Creating > Admitted > Stopped", ""),
    Pair("JobAdmitted", "JobDeleted", "submitted", "Creating > Admitted > Stopped", ""),
    Pair("AdmissionDecided", "JobStarted", "submitted", "Creating > Running", ""),  # either way
    Pair("AdmissionDecided", "OccupancyStarted", "submitted",
         "Creating > Running", "p1"),  # either way
    Pair("AdmissionDecided", "OccupancyEnded", "submitted", "Creating", ""),  # either way
    Pair("AdmissionDecided", "PreemptionDecided", "submitted", "Creating", ""),  # either way
    Pair("AdmissionDecided", "JobRestarted", "submitted",
         "Creating > Restarting", ""),  # either way
    Pair("AdmissionDecided", "JobPreempted", "submitted", "Creating > Preempted", ""),  # either way
    Pair("AdmissionDecided", "JobSucceeded", "submitted", "Creating > Succeeded", ""),  # either way
    Pair("AdmissionDecided", "JobFailed", "submitted", "Creating > Failed", ""),  # either way
    Pair("AdmissionDecided", "JobStopped", "submitted", "Creating > Stopped", ""),  # either way
    Pair("AdmissionDecided", "JobDeleted", "submitted", "Creating > Stopped", ""),  # either way
    Pair("JobStarted", "OccupancyEnded", "submitted", "Creating > Running", ""),  # either way
    Pair("JobStarted", "PreemptionDecided", "submitted", "Creating > Running", ""),  # either way
    Pair("JobStarted", "JobRestarted", "submitted", "Creating > Running > Restarting", ""),
    Pair("JobStarted", "JobPreempted", "submitted", "Creating > Running > Preempted", ""),
    Pair("JobStarted", "JobSucceeded", "submitted", "Creating > Running > Succeeded", ""),
    Pair("JobStarted", "JobFailed", "submitted", "Creating > Running > Failed", ""),
    Pair("JobStarted", "JobStopped", "submitted", "Creating > Running > Stopped", ""),
    Pair("JobStarted", "JobDeleted", "submitted", "Creating > Running > Stopped", ""),
    Pair("OccupancyStarted", "OccupancyEnded", "stopping", "Creating > Running > Stopping", "p1"),
    Pair("OccupancyStarted", "PreemptionDecided", "submitted",
         "Creating > Running", "p1"),  # either way
    Pair("OccupancyStarted", "JobRestarted", "submitted",
         "Creating > Running > Restarting", "p1"),
    Pair("OccupancyStarted", "JobPreempted", "submitted", "Creating > Running > Preempted", "p1"),
    Pair("OccupancyStarted", "JobSucceeded", "submitted", "Creating > Running > Succeeded", "p1"),
    Pair("OccupancyStarted", "JobFailed", "submitted", "Creating > Running > Failed", "p1"),
    Pair("OccupancyStarted", "JobStopped", "submitted", "Creating > Running > Stopping", "p1"),
    Pair("OccupancyStarted", "JobDeleted", "submitted", "Creating > Running > Stopping", "p1"),
    Pair("OccupancyEnded", "PreemptionDecided", "submitted", "Creating", ""),  # either way
    Pair("OccupancyEnded", "JobRestarted", "stopping",
         "Creating > Running > Stopping > Stopped", ""),
    Pair("OccupancyEnded", "JobPreempted", "stopping",
         "Creating > Running > Stopping > Stopped", ""),
    Pair("OccupancyEnded", "JobSucceeded", "stopping",
         "Creating > Running > Stopping > Stopped", ""),
    Pair("OccupancyEnded", "JobFailed", "stopping",
         "Creating > Running > Stopping > Stopped", ""),
    Pair("OccupancyEnded", "JobStopped", "running", "Creating > Running > Stopped", ""),
    Pair("OccupancyEnded", "JobDeleted", "running", "Creating > Running > Stopped", ""),
    Pair("PreemptionDecided", "JobSucceeded", "submitted",
         "Creating > Succeeded", ""),  # either way
    Pair("PreemptionDecided", "JobFailed", "submitted", "Creating > Failed", ""),  # either way
    Pair("PreemptionDecided", "JobStopped", "submitted", "Creating > Stopped", ""),  # either way
    Pair("PreemptionDecided", "JobDeleted", "submitted", "Creating > Stopped", ""),  # either way
    Pair("JobRestarted", "JobSucceeded", "submitted", "Creating > Restarting > Succeeded", ""),
    Pair("JobRestarted", "JobFailed", "submitted", "Creating > Restarting > Failed", ""),
    Pair("JobRestarted", "JobStopped", "submitted", "Creating > Restarting > Stopped", ""),
    Pair("JobRestarted", "JobDeleted", "submitted", "Creating > Restarting > Stopped", ""),
    Pair("JobPreempted", "JobSucceeded", "submitted", "Creating > Preempted > Succeeded", ""),
    Pair("JobPreempted", "JobFailed", "submitted", "Creating > Preempted > Failed", ""),
    Pair("JobPreempted", "JobStopped", "submitted", "Creating > Preempted > Stopped", ""),
    Pair("JobPreempted", "JobDeleted", "submitted", "Creating > Preempted > Stopped", ""),
    Pair("JobSucceeded", "JobStopped", "submitted", "Creating > Succeeded", ""),
    Pair("JobSucceeded", "JobDeleted", "submitted", "Creating > Succeeded", ""),
    Pair("JobFailed", "JobStopped", "submitted", "Creating > Failed", ""),
    Pair("JobFailed", "JobDeleted", "submitted", "Creating > Failed", ""),
]
# fmt: on

#: Kinds ranked alike: no order between them to pin (store position decides).
SAME_RANK = [
    {"JobAdmitted", "AdmissionDecided"},
    {"JobStarted", "OccupancyStarted"},
    {"PreemptionDecided", "JobRestarted", "JobPreempted"},
    {"JobSucceeded", "JobFailed"},
    {"JobStopped", "JobDeleted"},
]
DECISIONS = frozenset({"AdmissionDecided", "PreemptionDecided"})
KINDS = sorted({p.earlier for p in PAIRS} | {p.later for p in PAIRS})
EARLY, INSTANT = 0.0, 10.0


def _name(pair: Pair) -> str:
    return f"{pair.earlier}<{pair.later}"


def test_the_table_covers_every_pair_of_kinds_ranked_apart() -> None:
    # the ranked kinds, not their ranks: a kind ranked later must join the table
    assert set(KINDS) == set(_RANK)
    pairs = [frozenset((p.earlier, p.later)) for p in PAIRS]
    assert len(set(pairs)) == len(pairs)
    alike = {frozenset((a, b)) for group in SAME_RANK for a in group for b in group if a != b}
    everything = {frozenset((a, b)) for a in KINDS for b in KINDS if a != b}
    assert set(pairs) == everything - alike


#: The lifecycle transitions: each names its job and nothing else.
TRANSITIONS: dict[str, Callable[..., EventData]] = {
    "JobQueued": JobQueued, "JobAdmitted": JobAdmitted, "JobStarted": JobStarted,
    "JobRestarted": JobRestarted, "JobPreempted": JobPreempted, "JobSucceeded": JobSucceeded,
    "JobFailed": JobFailed, "JobStopped": JobStopped, "JobDeleted": JobDeleted,
}  # fmt: skip


def _event(kind: str, uid: str, second: float) -> tuple[EventData, str]:
    """(data, stream) of ``kind`` about job ``uid`` at ``second``: decisions are stored on
    their quota's stream, everything else on the job's own."""
    when = at(second)
    data: EventData
    if kind == "AdmissionDecided":
        data = AdmissionDecided(job_uid=uid, quota="q", outcome="admit")
        return data, "quota/q"
    if kind == "PreemptionDecided":
        victim = Victim(job_uid=uid, quota="q", reason="lower priority")
        data = PreemptionDecided(preemptor="someone", victims=(victim,), reason="priority")
        return data, "quota/q"
    if kind == "JobSubmitted":
        data = JobSubmitted(job_uid=uid, name=uid, workspace="ws", replicas=(replica(),))
    elif kind == "OccupancyStarted":
        # the pair's pod start binds p1; the preamble's (at second 0) bound p0
        pod = "p0" if second == EARLY else "p1"
        data = OccupancyStarted(
            occupancy_id=pod, job_uid=uid, pod_uid=f"{uid}-{pod}", node="n1", mgpu=1000,
            cpu_milli=1000, memory_mib=1024, workspace="ws", started_at=when,
        )  # fmt: skip
    elif kind == "OccupancyEnded":
        data = OccupancyEnded(occupancy_id="p0", job_uid=uid, pod_uid=f"{uid}-p0", ended_at=when)
    else:
        data = TRANSITIONS[kind](job_uid=uid)
    return data, f"job/{uid}"


PREAMBLES = {
    "none": [],
    "submitted": ["JobSubmitted"],
    "running": ["JobSubmitted", "OccupancyStarted"],
    "stopping": ["JobSubmitted", "OccupancyStarted", "JobStopped"],
}


def _story(pair: Pair, uid: str, *, later_stored_first: bool) -> list[tuple[str, float]]:
    """(kind, second) of the preamble, then the pair in the given store order."""
    both = [pair.later, pair.earlier] if later_stored_first else [pair.earlier, pair.later]
    return [(k, EARLY) for k in PREAMBLES[pair.preamble]] + [(k, INSTANT) for k in both]


def _path(transitions: list[list[str]]) -> str:
    return " > ".join(status for status, _ in transitions)


@pytest.mark.parametrize("later_stored_first", [False, True], ids=["in-rank-order", "reversed"])
@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if not {p.earlier, p.later} & DECISIONS], ids=_name
)
def test_the_fold_of_a_pair_at_one_instant(pair: Pair, later_stored_first: bool) -> None:
    facts: list[Fact] = []
    for position, (kind, second) in enumerate(
        _story(pair, "J", later_stored_first=later_stored_first), start=1
    ):
        data, _ = _event(kind, "J", second)
        facts.append(Fact(kind, data.model_dump(mode="json"), at(second), position))
    (later,) = [f.position for f in facts if f.kind == pair.later and f.occurred_at == at(INSTANT)]
    job = fold_facts("J", None, facts)
    assert (_path(job.transitions), ",".join(job.open_occupancies)) == (pair.path, pair.pods)
    assert job.fold_position == later  # the later-ranked fact is the one folded last


@pytest.fixture(scope="module")
def projected(databases: TemplateDatabases) -> Iterator[dict[tuple[str, bool], dict[str, Any]]]:
    """Every pair stored in both orders, one job each, projected a page per event (so a
    fact stored after one it ranks before re-folds its job), then read back."""
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        n = Narrator("fold-ranks")
        jobs: dict[tuple[str, bool], str] = {}
        for i, pair in enumerate(PAIRS):
            for reverse in (False, True):
                uid = jobs[_name(pair), reverse] = f"r{i}-{'ba' if reverse else 'ab'}"
                for kind, second in _story(pair, uid, later_stored_first=reverse):
                    data, stream = _event(kind, uid, second)
                    n.tell(data, stream, at(second))
        store.append(n.events)
        Projector(store, [JobsProjection()], page_size=1).catch_up()
        out: dict[tuple[str, bool], dict[str, Any]] = {}
        with store.snapshot() as uow:
            states = {
                row.job_uid: row
                for row in uow.connection.execute(
                    select(
                        job_state.c.job_uid, job_state.c.transitions, job_state.c.open_occupancies
                    )
                )
            }
            for key, uid in jobs.items():
                rows = timeline_rows(uow, uid)
                state = states[uid]
                out[key] = {
                    "at_instant": [r[3] for r in rows if r[2] == at(INSTANT)],
                    "path": _path(state.transitions),
                    "pods": ",".join(state.open_occupancies),
                }
        yield out
    finally:
        store.close()
        databases.drop(url)


@pytest.mark.parametrize("later_stored_first", [False, True], ids=["in-rank-order", "reversed"])
@pytest.mark.parametrize("pair", PAIRS, ids=_name)
def test_the_projected_job_and_its_timeline(
    projected: dict[tuple[str, bool], dict[str, Any]], pair: Pair, later_stored_first: bool
) -> None:
    got = projected[_name(pair), later_stored_first]
    assert got == {"at_instant": [pair.earlier, pair.later], "path": pair.path, "pods": pair.pods}


def _workload_fact(kind: str, second: float, position: int) -> Fact:
    data: dict[str, Any] = {"job_uid": "svc"}
    if kind == "WorkloadCreated":
        data |= {"name": "ranker", "workload": "service", "kind": "Deployment"}
        data |= {"workspace": "w", "replicas": 1, "replica": replica().model_dump()}
    elif kind.startswith("Occupancy"):
        data |= {"occupancy_id": "p0", "started_at": at(0).isoformat()}
        data |= {"ended_at": at(second).isoformat()}
    return Fact(kind, data, at(second), position)


@pytest.mark.parametrize("deleted_first", [True, False], ids=["stored-first", "stored-last"])
def test_a_workload_is_deleted_after_the_pods_of_its_instant(deleted_first: bool) -> None:
    """A service deleted in the instant its last replica ends: the release folds first, so
    the service stops there, never Stopping with no pod left (docs/workloads.md)."""
    last = ["WorkloadDeleted", "OccupancyEnded"]
    if not deleted_first:
        last.reverse()
    facts = [
        _workload_fact("WorkloadCreated", EARLY, 1),
        _workload_fact("OccupancyStarted", EARLY, 2),
        *(_workload_fact(kind, INSTANT, 3 + i) for i, kind in enumerate(last)),
    ]
    job = fold_facts("svc", None, facts)
    assert [status for status, _ in job.transitions] == ["Creating", "Running", "Stopped"]
    assert job.open_occupancies == [] and job.deleted_at == at(INSTANT)
