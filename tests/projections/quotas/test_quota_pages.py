"""The quota projection does not depend on page boundaries: projected incrementally, one
event per page, it equals a rebuild row for row (regression for duplicate JobSubmitted)."""

from __future__ import annotations

from sqlalchemy import text

from consumers.projector import Projector
from ledger.envelopes import Envelope
from ledger.events import JobStarted
from ledger.store.postgres import PostgresEventStore
from projections.quotas.projection import QuotaProjection
from tests.projections.quotas.test_quota_projection import CHANGED, TREE
from tests.support.quotas import (
    at,
    dump_tables,
    occ_ended,
    occ_started,
    submitted,
    transition,
    tree_events,
)


def incremental_equals_rebuild(store: PostgresEventStore, events: list[Envelope]) -> None:
    store.append(events)
    projection = QuotaProjection()
    Projector(store, [projection], page_size=1).catch_up()
    incremental = dump_tables(store)
    Projector(store, [projection], page_size=1000).rebuild(projection)
    assert dump_tables(store) == incremental


def test_duplicate_job_submitted_one_event_per_page(store: PostgresEventStore) -> None:
    incremental_equals_rebuild(
        store,
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-a", at(10), mgpu=1500),
            submitted("j1", "ws-a", at(10), mgpu=1500),  # same job, another event id
            occ_started("p1", "j1", "ws-a", at(20), mgpu=1500),
            submitted("j1", "ws-a", at(20), mgpu=1500),  # a watcher re-observation
            occ_started("p1", "j1", "ws-a", at(20), mgpu=1500),
        ],
    )


def test_changes_that_cancel_within_an_instant_leave_no_change_point(
    store: PostgresEventStore,
) -> None:
    incremental_equals_rebuild(
        store,
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-b", at(10), mgpu=500),
            transition(JobStarted, "j1", at(10)),
            occ_started("p1", "j1", "ws-b", at(20), mgpu=2500),
            occ_ended("p1", "j1", at(20)),  # the pod came and went within the instant
            submitted("j2", "ws-nowhere", at(30), mgpu=700),
            occ_started("p2", "j2", "ws-nowhere", at(30), mgpu=700),
            occ_ended("p2", "j2", at(40)),
        ],
    )


def test_a_quota_deleted_and_restored_within_an_instant_across_pages(
    store: PostgresEventStore,
) -> None:
    incremental_equals_rebuild(
        store,
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-c", at(5), mgpu=500),
            occ_started("p1", "j1", "ws-c", at(5), mgpu=500),
            *tree_events(CHANGED, at(10), current=TREE),  # c deleted, b resized ...
            *tree_events(TREE, at(10), current=CHANGED),  # ... and back, same instant
            *tree_events(CHANGED, at(20), current=TREE),  # deleted for good
        ],
    )


def test_a_page_writes_one_change_row_per_instant_and_quota(store: PostgresEventStore) -> None:
    store.append(
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-a", at(10), mgpu=500),
            transition(JobStarted, "j1", at(10)),
            occ_started("p1", "j1", "ws-a", at(10), mgpu=500),
            submitted("j2", "ws-b", at(10), mgpu=700),  # same instant, another quota
            occ_ended("p1", "j1", at(20)),
        ]
    )
    first_job_event = len(tree_events(TREE, at(0))) + 1
    projection = QuotaProjection()
    Projector(store, [projection], page_size=1000).catch_up()
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT at, position, quota, changes FROM quota_changes ORDER BY at, quota")
        ).all()
    assert [(r.at, r.quota) for r in rows] == [(at(10), "a"), (at(10), "b"), (at(20), "a")]
    # keyed by a position of one of the page's events about that quota's jobs
    a_events = range(first_job_event, first_job_event + 5)
    assert rows[0].position in a_events and rows[2].position in a_events
    assert rows[1].position == first_job_event + 3
    # submitted then started within the instant: running, no longer queued
    assert rows[0].changes["gpu/any"] == [500, 0, 0, 1, 0]
    # its pod ended, the job did not: queued again (demand 500, one queued job)
    assert rows[2].changes["gpu/any"] == [-500, 0, 500, -1, 1]


def test_a_page_rewrites_only_the_pods_its_events_name(store: PostgresEventStore) -> None:
    """A job's later events leave its other pods' rows alone: a long job with many
    restarted pods must not pay for its whole history in every page that names it."""
    store.append(
        [
            *tree_events(TREE, at(0)),
            submitted("j1", "ws-a", at(10), mgpu=1000),
            occ_started("p1", "j1", "ws-a", at(20), mgpu=1000),
            occ_ended("p1", "j1", at(30)),
            occ_started("p2", "j1", "ws-a", at(40), mgpu=1000),
        ]
    )
    projection = QuotaProjection()
    projector = Projector(store, [projection])
    projector.catch_up()

    def versions() -> dict[str, str]:  # xmin: the transaction that wrote the row version
        with store.engine.connect() as conn:
            rows = conn.execute(text("SELECT occupancy_id, xmin::text FROM quota_occupancies"))
            return {occupancy: xmin for occupancy, xmin in rows}

    before = versions()
    store.append([occ_ended("p2", "j1", at(50)), transition(JobStarted, "j1", at(50))])
    projector.catch_up()
    after = versions()
    assert after.keys() == {"p1", "p2"}
    assert after["p1"] == before["p1"]  # the ended pod, untouched
    assert after["p2"] != before["p2"]  # the pod the page ended, rewritten
