"""The projector (``project --follow``): an event a fold raises on is skipped, dead-lettered.

Poison: an ``OccupancyStarted`` stored before its bounds existed (bounds are checked on
new facts only: ``ledger/bounds.py``) asking for 2**63 mGPU: the occupancy, quotas and
billing folds cannot write it (``OverflowError`` in the binary COPY, ``bigint out of
range``). Before issue 44 the step raised, its transaction rolled back, and the runner
died; restarted, it read the same window again and died again, so no projection moved past
that position. And one starting at 9999-12-31T23:59:59.999999Z: the quotas fold overflowed
``datetime`` (the hour after it) when it was its page's earliest change, and its rollups'
maintenance and reads did further on; the quotas fold now refuses an instant outside the
facts' bounds on the event alone, so it is skipped the same way in any pages.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from consumers.projector import Projector, caught_up
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore
from projections.quotas.tables import quota_occupancies
from projections.registry import all_projections, projection_named
from tests.support.clis import CliCall
from tests.support.factories import occupancy_started
from tests.support.letters import listed_letters
from tests.support.watchers import wait_for


def _stored_before_the_bound(base: Envelope, **data: object) -> Envelope:
    """``base`` with ``data`` changed, as a fact stored before its bound existed (the
    envelope's ``data`` is not checked against the catalogue's bounds on append)."""
    fields = base.model_dump(exclude={"data"})
    return Envelope(**{**fields, "event_id": uuid.uuid4(), "data": {**base.data, **data}})


POISON = {"mgpu": 2**63}


@pytest.fixture
def following(store: PostgresEventStore) -> Iterator[threading.Thread]:
    """``project --follow``: every projection tailing the store on a thread of its own."""
    stop = threading.Event()
    runner = threading.Thread(
        target=Projector(store, all_projections()).run_forever,
        args=(stop,),
        kwargs={"poll_interval": 0.05},
        daemon=True,
    )
    runner.start()
    yield runner
    stop.set()
    runner.join(10)


def _occupancies(store: PostgresEventStore) -> list[tuple[object, ...]]:
    with store.snapshot() as uow:
        rows = uow.connection.execute(
            select(quota_occupancies).order_by(quota_occupancies.c.occupancy_id)
        ).all()
    return [tuple(r) for r in rows]


def _settled(store: PostgresEventStore, runner: threading.Thread) -> None:
    wait_for(
        lambda: not runner.is_alive() or caught_up(store, all_projections()),
        what="projector at the head",
    )
    assert runner.is_alive(), "the projector stopped"


def test_a_poison_event_is_skipped_and_the_projector_goes_on(
    store: PostgresEventStore, following: threading.Thread, cli: CliCall
) -> None:
    poison = _stored_before_the_bound(occupancy_started(2), **POISON)
    store.append([occupancy_started(1), poison, occupancy_started(3)])
    _settled(store, following)
    assert [r[0] for r in _occupancies(store)] == ["pod-1", "pod-3"]
    letters = listed_letters(cli)
    assert sorted((r["source"], r["reason"], r["count"]) for r in letters) == [
        ("projection:billing", "fold-failed", 1),
        ("projection:occupancy", "fold-failed", 1),
        ("projection:quotas", "fold-failed", 1),
    ]
    assert all(str(poison.event_id) in str(r["error"]) for r in letters)
    letters = [r for r in letters if r["source"] == "projection:quotas"]

    # the process goes on: the next good event is projected
    store.append([occupancy_started(4)])
    _settled(store, following)
    assert [r[0] for r in _occupancies(store)] == ["pod-1", "pod-3", "pod-4"]

    # deterministic: a rebuild (one page, not the live pages) skips the same event alone
    live = _occupancies(store)
    Projector(store, [projection_named("quotas")]).rebuild(projection_named("quotas"))
    assert _occupancies(store) == live
    again = {r["source"]: r["count"] for r in listed_letters(cli)}
    assert again["projection:quotas"] == 2

    # requeue: a retry rebuilds the projection; the fold still raises, so it is skipped
    # again and the letter reopens (exit 1); discard: resolve
    out = cli("dead-letters", "retry", str(letters[0]["id"]), ok=False)
    assert "still fails" in out
    assert _occupancies(store) == live
    cli("dead-letters", "resolve", str(letters[0]["id"]))
    assert "projection:quotas" not in {r["source"] for r in listed_letters(cli)}


def test_an_instant_at_the_end_of_time_does_not_stop_the_projector(
    store: PostgresEventStore, following: threading.Thread, cli: CliCall
) -> None:
    late = _stored_before_the_bound(occupancy_started(2), started_at="9999-12-31T23:59:59.999999Z")
    store.append([late])  # alone in its page: the page's earliest change is this one
    _settled(store, following)
    store.append([occupancy_started(3)])
    _settled(store, following)
    store.append([occupancy_started(1)])  # earlier than 3: the page before it is rebuilt
    _settled(store, following)
    live = _occupancies(store)
    assert [r[0] for r in live] == ["pod-1", "pod-3"]
    assert [(r["source"], r["reason"]) for r in listed_letters(cli)] == [
        ("projection:quotas", "fold-failed")
    ]
    # the same rows from one page, where it is not the earliest change
    Projector(store, [projection_named("quotas")]).rebuild(projection_named("quotas"))
    assert _occupancies(store) == live
