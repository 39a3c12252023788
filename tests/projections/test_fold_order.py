"""A job's state is a function of its facts in cluster-time order, not of storage order.

Kafka orders events per key only and a watcher re-lists, so a job's end can be stored
before its start. Any permutation of a job's facts, appended in any batches and
projected in any page sizes, must give the same state and the same timeline as the
facts stored in the order they happened.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from consumers.projector import Projector
from ledger.envelopes import Envelope, EventData
from ledger.events import (
    JobDeleted,
    JobFailed,
    JobPreempted,
    JobQueued,
    JobRestarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    OccupancyEnded,
    OccupancyStarted,
    WorkspaceBound,
)
from ledger.store.postgres import PostgresEventStore
from projections.jobs import fold_order, job_detail
from projections.registry import all_projections
from tests.support.builders import Narrator, at, replica
from tests.support.databases import TemplateDatabases

_uids = itertools.count()


@pytest.fixture(scope="module")
def shared_store(databases: TemplateDatabases) -> Iterator[PostgresEventStore]:
    """One database for every example: each example folds jobs of its own uids."""
    url = databases.clone()
    store = PostgresEventStore(url)
    yield store
    store.close()
    databases.drop(url)


@st.composite
def stories(draw: st.DrawFn) -> list[tuple[EventData, float]]:
    """One job's facts as (event data, cluster second), in no particular order.

    Seconds come from a small range so that facts often share an instant.
    """
    second = st.integers(0, 12)
    submitted = draw(second)
    facts: list[tuple[EventData, float]] = [
        (JobSubmitted(job_uid="J", name="j", workspace="ws-a", replicas=(replica(),)), submitted)
    ]
    if draw(st.booleans()):
        facts.append((JobQueued(job_uid="J"), draw(second)))
    for pod in range(draw(st.integers(0, 3))):
        start = draw(second)
        facts.append(
            (
                OccupancyStarted(
                    occupancy_id=f"p{pod}",
                    job_uid="J",
                    pod_uid=f"p{pod}",
                    pod_name=f"pod-{pod}",
                    node="n1",
                    mgpu=1000,
                    cpu_milli=1000,
                    memory_mib=1024,
                    workspace="ws-a",
                    started_at=at(start),
                ),
                start,
            )
        )
        if draw(st.booleans()):
            end = start + draw(st.integers(0, 6))
            facts.append(
                (
                    OccupancyEnded(
                        occupancy_id=f"p{pod}", job_uid="J", pod_uid=f"p{pod}", ended_at=at(end)
                    ),
                    end,
                )
            )
    for model in draw(st.lists(st.sampled_from([JobRestarted, JobPreempted]), max_size=2)):
        facts.append((model(job_uid="J"), draw(second)))
    outcome = draw(st.sampled_from([None, JobSucceeded, JobFailed, JobStopped]))
    if outcome is not None:
        facts.append((outcome(job_uid="J"), draw(st.integers(0, 18))))
    if draw(st.booleans()):
        facts.append((JobDeleted(job_uid="J"), draw(st.integers(0, 18))))
    return facts


def _tell(facts: list[tuple[EventData, float]], uid: str) -> list[Envelope]:
    n = Narrator(uid)
    for data, second in facts:
        update: dict[str, Any] = {"job_uid": uid}
        if isinstance(data, OccupancyStarted | OccupancyEnded):  # pods are unique per job
            update |= {"occupancy_id": f"{uid}-{data.pod_uid}", "pod_uid": f"{uid}-{data.pod_uid}"}
        n.tell(data.model_copy(update=update), f"job/{uid}", at(second))
    return n.events


def _append_in_batches(store: PostgresEventStore, events: list[Envelope], cuts: list[int]) -> None:
    bounds = sorted({0, len(events), *(c % (len(events) + 1) for c in cuts)})
    for lo, hi in itertools.pairwise(bounds):
        store.append(events[lo:hi])


def _comparable(detail: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in detail.items() if k not in ("job_uid", "timeline")}
    # equal-rank facts at one instant keep store order between them: compare what
    # happened at each instant, in order, and the texts as a set
    out["timeline"] = [(t["occurred_at"], fold_order(at(0), t["type"], 0)[1]) for t in
                       detail["timeline"]]  # fmt: skip
    out["summaries"] = sorted(t["summary"].replace(detail["job_uid"], "J")
                              for t in detail["timeline"])  # fmt: skip
    return out


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    facts=stories(),
    order=st.randoms(use_true_random=False),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    page=st.integers(1, 6),
)
def test_any_storage_order_and_paging_gives_the_same_state_and_timeline(
    shared_store: PostgresEventStore,
    facts: list[tuple[EventData, float]],
    order: Any,
    cuts: list[int],
    page: int,
) -> None:
    n = next(_uids)
    reference, shuffled = f"ref-{n}", f"mix-{n}"
    # the reference is stored in cluster-time order, in one batch
    chronological = sorted(
        _tell(facts, reference), key=lambda e: fold_order(e.occurred_at, e.type, 0)
    )
    shared_store.append(chronological)
    mixed = _tell(facts, shuffled)
    order.shuffle(mixed)
    _append_in_batches(shared_store, mixed, cuts)
    Projector(shared_store, all_projections(), page_size=page).catch_up()

    with shared_store.snapshot() as uow:
        want = job_detail(uow, reference)
        got = job_detail(uow, shuffled)
    assert _comparable(got) == _comparable(want)
    assert not any(t["late"] for t in want["timeline"])
    times = [t["occurred_at"] for t in got["timeline"]]
    assert times == sorted(times)


def test_a_job_whose_end_is_stored_first_still_ran(shared_store: PostgresEventStore) -> None:
    """The openb defect: the failure and the pod's release stored before the pod's start."""
    n = Narrator("end-first")
    n.tell(WorkspaceBound(workspace="ws-e", quota="q-e"), "workspace/ws-e", at(0))
    facts = [
        (JobSubmitted(job_uid="e1", name="e1", workspace="ws-e"), 0.0),
        (JobFailed(job_uid="e1", reason="Error"), 100.0),
        (OccupancyEnded(occupancy_id="p", job_uid="e1", pod_uid="p", ended_at=at(100)), 100.0),
        (
            OccupancyStarted(
                occupancy_id="p",
                job_uid="e1",
                pod_uid="p",
                pod_name="e1-0",
                node="n1",
                mgpu=500,
                cpu_milli=1000,
                memory_mib=1024,
                workspace="ws-e",
                started_at=at(40),
            ),
            40.0,
        ),
    ]
    for data, second in facts:
        n.tell(data, "job/e1", at(second))
    projector = Projector(shared_store, all_projections(), page_size=1)
    for event in n.events:  # each its own page: the start re-folds a failed job
        shared_store.append([event])
        projector.catch_up()
    with shared_store.snapshot() as uow:
        job = job_detail(uow, "e1")
    assert job["status"] == "Failed"
    assert job["entered"]["Running"] == "2026-11-01T00:00:40Z"
    assert job["running_seconds"] == 60
    assert job["quota"] == "q-e"  # the binding resolved at submission survives a re-fold
    assert [t["type"] for t in job["timeline"]] == [
        "JobSubmitted",
        "OccupancyStarted",
        "OccupancyEnded",
        "JobFailed",
    ]
    # the start arrived last; the release shares the failure's instant: not late
    assert [t["late"] for t in job["timeline"]] == [False, True, False, False]
