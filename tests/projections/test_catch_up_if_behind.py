"""``catch_up_if_behind``: the dispatcher's refresh projects what is behind, and takes no
lock and no write transaction when every checkpoint is at the head already (every cycle
pays it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest
from sqlalchemy import text

from consumers.projector import catch_up_if_behind, caught_up
from ledger.events import JobSubmitted, JobSucceeded
from ledger.store.base import UnitOfWork
from ledger.store.postgres import PostgresEventStore
from projections.jobs import JobsProjection
from tests.support.builders import Narrator, at


class _NoWrites(PostgresEventStore):
    """The store, but a write transaction fails the test."""

    def transaction(self) -> AbstractContextManager[UnitOfWork]:  # type: ignore[override]
        raise AssertionError("a write transaction was opened")


def _jobs(store: PostgresEventStore, n: Narrator, first: int, count: int) -> None:
    told = len(n.events)
    for i in range(first, first + count):
        n.tell(JobSubmitted(job_uid=f"u{i}", name=f"j{i}", workspace="ws"), f"job/u{i}", at(i))
        n.tell(JobSucceeded(job_uid=f"u{i}"), f"job/u{i}", at(i + 1))
    store.append(n.events[told:])


def _jobs_projected(store: PostgresEventStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM job_state")).scalar_one())


@pytest.fixture
def readonly(store: PostgresEventStore) -> Iterator[_NoWrites]:
    reader = _NoWrites(store.engine)
    yield reader


def test_behind_then_at_head(store: PostgresEventStore, readonly: _NoWrites) -> None:
    n = Narrator()
    _jobs(store, n, 0, 3)
    assert not caught_up(store, [JobsProjection()])
    with pytest.raises(AssertionError, match="write transaction"):
        catch_up_if_behind(readonly, [JobsProjection()])  # behind: it must write
    catch_up_if_behind(store, [JobsProjection()])
    assert _jobs_projected(store) == 3
    assert caught_up(store, [JobsProjection()])
    catch_up_if_behind(readonly, [JobsProjection()])  # at the head: reads only

    _jobs(store, n, 3, 2)  # new events: behind again, and caught up on the next read
    assert not caught_up(store, [JobsProjection()])
    catch_up_if_behind(store, [JobsProjection()])
    assert _jobs_projected(store) == 5
