"""The ``extent`` read model equals the scan of the events it replaced, whatever order the
facts arrive in and however the projector pages them; the exact clock equals the scan at
any lag; a rebuild gives the same rows; reading moves nothing.

The reference is the scan ``/v1/extent`` and the cluster clock ran before the read model
(issue 37), written out here so it cannot drift with the code under test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from sqlalchemy import text

from consumers.projector import Projector
from dlc_ledger.presenters import Extent, data_extent
from dlc_ledger.services.clocks import observed_cluster_time, projected_cluster_time
from ledger.envelopes import EventData
from ledger.events import (
    JobSubmitted,
    JobSucceeded,
    NodeRegistered,
    OccupancyStarted,
    WorkspaceBound,
)
from ledger.store.postgres import PostgresEventStore
from projections.extent import ExtentProjection, extent_sources
from tests.support.builders import Narrator, at, replica
from tests.support.databases import TemplateDatabases
from tests.support.tables import table_rows

#: cluster facts, whatever the stream; then every event of a job's or node's stream
_FACTS = (
    "'JobSubmitted', 'JobQueued', 'JobAdmitted', 'JobStarted', 'JobRestarted', "
    "'JobPreempted', 'JobSucceeded', 'JobFailed', 'JobStopped', 'JobDeleted', "
    "'OccupancyStarted', 'OccupancyEnded', 'NodeRegistered', 'NodeCordoned', 'NodeRemoved'"
)
_SCAN = f"""
SELECT (SELECT max(occurred_at) FROM events
        WHERE (stream LIKE 'job/%' OR stream LIKE 'node/%') AND position <= :upto) AS last,
       min(occurred_at) AS first,
       array_agg(DISTINCT source) FILTER (WHERE starts_with(source, 'kube-watcher/')) AS sources
FROM events WHERE type IN ({_FACTS}) AND position <= :upto
"""
SOURCES = ("kube-watcher/a", "kube-watcher/replay-b", "kube-watcher/c", "api/test")


def _scanned(store: PostgresEventStore, upto: int = 2**62) -> Extent:
    """The span as the scan had it, over the events up to position ``upto``."""
    with store.reading() as conn:
        row = conn.execute(text(_SCAN), {"upto": upto}).one()
    clusters = tuple(sorted(s.removeprefix("kube-watcher/") for s in row.sources or ()))
    return Extent(row.first, row.last, any(c.startswith("replay-") for c in clusters), clusters)


def _checkpoint(store: PostgresEventStore) -> int:
    with store.snapshot() as uow:
        return uow.load_checkpoint("projection:extent").position


def _rows(store: PostgresEventStore) -> list[tuple[Any, ...]]:
    with store.reading() as conn:
        return table_rows(conn, extent_sources)


def _event(kind: str, n: int) -> tuple[EventData, str]:
    """One event of ``kind`` about job or node ``n``, and its stream."""
    uid, node = f"uid-{n}", f"node-{n}"
    if kind == "submit":
        submitted = JobSubmitted(job_uid=uid, name="j", workspace="ws", replicas=(replica(),))
        return submitted, f"job/{uid}"
    if kind == "succeed":
        return JobSucceeded(job_uid=uid), f"job/{uid}"
    if kind == "occupy":
        pod = f"{uid}-pod"
        occupancy = OccupancyStarted(
            occupancy_id=pod,
            job_uid=uid,
            pod_uid=pod,
            node=node,
            mgpu=1000,
            cpu_milli=1000,
            memory_mib=512,
            workspace="ws",
            started_at=at(0),
        )
        return occupancy, f"job/{uid}"
    if kind == "node":
        return NodeRegistered(node=node, gpus=8, cpu_milli=1000, memory_mib=1024), f"node/{node}"
    if kind == "fact-elsewhere":  # a cluster fact outside the job and node streams
        return JobSucceeded(job_uid=uid), "quota/q"
    if kind == "command-in-job-stream":  # no cluster fact, yet in a job's stream
        return WorkspaceBound(workspace="ws", quota="q"), f"job/{uid}"
    return WorkspaceBound(workspace=f"ws-{n}", quota="q"), f"workspace/ws-{n}"  # neither


KINDS = ("submit", "succeed", "occupy", "node", "fact-elsewhere", "command-in-job-stream", "other")
told = st.tuples(
    st.sampled_from(KINDS),
    st.integers(0, 5),  # which job or node
    st.sampled_from(SOURCES),
    st.integers(-3600, 3600),  # seconds from the epoch: stored in any order
)


def _narrate(steps: Sequence[tuple[str, int, str, int]]) -> Narrator:
    n = Narrator("extent")
    for kind, which, source, seconds in steps:
        data, stream = _event(kind, which)
        n.tell(data, stream, at(seconds), source=source)
    return n


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(told, min_size=1, max_size=40),
    batches=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    pages=st.lists(st.one_of(st.none(), st.integers(1, 7)), min_size=1, max_size=5),
)
def test_the_read_model_equals_the_scan_at_any_lag_and_after_a_rebuild(
    databases: TemplateDatabases,
    steps: list[tuple[str, int, str, int]],
    batches: list[int],
    pages: list[int | None],
) -> None:
    events = _narrate(steps).events
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        appended, turn = 0, 0
        while appended < len(events):
            size = batches[turn % len(batches)]
            store.append(events[appended : appended + size])
            appended += size
            page = pages[turn % len(pages)]
            turn += 1
            if page is not None:  # else the projector lags a batch more
                projector = Projector(store, [ExtentProjection()], page_size=page)
                projector.step(projector.projections[0])
            folded = _checkpoint(store)
            # the API's span: the read model's, as of its checkpoint; the clock: exact
            assert data_extent(store) == _scanned(store, folded)
            assert projected_cluster_time(store) == _scanned(store, folded).last
            assert observed_cluster_time(store) == _scanned(store).last
        Projector(store, [ExtentProjection()], page_size=3).catch_up()
        assert data_extent(store) == _scanned(store)
        incremental = _rows(store)
        Projector(store, [ExtentProjection()], page_size=1000).rebuild(ExtentProjection())
        assert _rows(store) == incremental
    finally:
        store.close()
        databases.drop(url)


def test_late_facts_and_every_kind_of_source(store: PostgresEventStore) -> None:
    n = Narrator("extent-late")
    n.tell(*_event("submit", 1), at(600), source="kube-watcher/a")
    n.tell(*_event("node", 1), at(900), source="kube-watcher/replay-b")
    n.tell(*_event("succeed", 1), at(300), source="kube-watcher/a")  # stored late, told early
    n.tell(*_event("other", 1), at(-7200), source="api/test")  # no fact: neither first nor last
    n.tell(*_event("fact-elsewhere", 2), at(-60), source="api/test")  # first, not last
    n.tell(*_event("command-in-job-stream", 2), at(1200), source="api/test")  # last, not first
    store.append(n.events)
    Projector(store, [ExtentProjection()], page_size=2).catch_up()
    found = data_extent(store)
    assert found == Extent(at(-60), at(1200), True, ("a", "replay-b")) == _scanned(store)
    assert _rows(store) == [
        ("api/test", at(-60), at(1200)),
        ("kube-watcher/a", at(300), at(600)),
        ("kube-watcher/replay-b", at(900), at(900)),
    ]


def test_reading_folds_nothing(store: PostgresEventStore) -> None:
    n = Narrator("extent-lag")
    n.tell(*_event("submit", 1), at(0), source="kube-watcher/a")
    store.append(n.events)
    Projector(store, [ExtentProjection()]).catch_up()
    folded, rows = _checkpoint(store), _rows(store)
    n.tell(*_event("succeed", 1), at(60), source="kube-watcher/c")
    store.append(n.events[-1:])
    assert observed_cluster_time(store) == at(60)  # the store's clock, exactly
    assert projected_cluster_time(store) == at(0)  # the read model's, not yet folded
    assert data_extent(store) == Extent(at(0), at(0), False, ("a",))
    assert (_checkpoint(store), _rows(store)) == (folded, rows)  # nothing moved


def test_an_empty_store_and_one_never_projected(store: PostgresEventStore) -> None:
    assert data_extent(store) == Extent(None, None, False, ())
    assert observed_cluster_time(store) is None
    n = Narrator("extent-unprojected")
    n.tell(*_event("node", 3), at(5), source="kube-watcher/a")
    store.append(n.events)
    # the projector never ran: the read model is empty, the exact clock reads every event
    assert data_extent(store) == Extent(None, None, False, ())
    assert observed_cluster_time(store) == at(5)
