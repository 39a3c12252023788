"""Catching up, rebuilding and reporting projections, called as use cases."""

from __future__ import annotations

import pytest

from dlc_ledger.services.errors import NotFound
from dlc_ledger.wiring.projections import (
    catch_up,
    projection_status,
    rebuild,
    select_projections,
)
from ledger.events import JobSubmitted, JobSucceeded
from ledger.store.postgres import PostgresEventStore
from projections.jobs import list_jobs
from tests.support.builders import Narrator, at


def _jobs(store: PostgresEventStore, count: int) -> None:
    n = Narrator()
    for i in range(count):
        n.tell(JobSubmitted(job_uid=f"u{i}", name=f"j{i}", workspace="ws"), f"job/u{i}", at(i))
        n.tell(JobSucceeded(job_uid=f"u{i}"), f"job/u{i}", at(i + 1))
    store.append(n.events)


def test_catch_up_rebuild_and_status(store: PostgresEventStore) -> None:
    _jobs(store, 5)
    lags = {s.name: s.lag for s in projection_status(store)}
    assert lags["jobs"] == 10 and lags["occupancy"] == 10

    done = catch_up(store, "jobs", page_size=3)
    assert (done.events, done.name) == (10, None) and done.seconds >= 0
    lags = {s.name: s.lag for s in projection_status(store)}
    assert lags["jobs"] == 0 and lags["occupancy"] == 10
    assert catch_up(store).events == 10  # the others; jobs is already there
    assert catch_up(store).events == 0 and catch_up(store).per_second is None

    with store.engine.connect() as conn:
        before = list_jobs(conn)
    (rebuilt,) = rebuild(store, "jobs")
    assert (rebuilt.name, rebuilt.events) == ("jobs", 10)
    with store.engine.connect() as conn:
        assert list_jobs(conn) == before
    assert [r.name for r in rebuild(store)] == [p.name for p in select_projections(None)]


def test_an_unknown_projection_is_not_found(store: PostgresEventStore) -> None:
    with pytest.raises(NotFound, match="no projection named 'nope'; known: "):
        select_projections("nope")
    with pytest.raises(NotFound):
        list(rebuild(store, "nope"))
