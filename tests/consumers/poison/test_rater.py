"""The rater, in the billing tick (``billing serve``, ``up``): an occupancy whose rating
fails on its values is dead-lettered (source ``billing-rater``, reason ``rating-failed``); the
other occupancies are rated.

Poison: an ``OccupancyStarted`` stored before its bounds existed (bounds are checked on
new facts only: ``ledger/bounds.py``) holding 2**50 mGPU: the read models fold it (it
fits a ``bigint``), but its usage (mGPU x microseconds) passes 2**63 within seconds, so
the rating transaction's ``usage`` breaks its bound: ``make_envelope`` raises
``OutOfBounds``. Before issue 44 only an occupancy without an applicable rate was set
aside: this error left the rater, its transaction rolled back, so nobody's usage was rated
or invoiced again, every tick.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from consumers.billing_scheduler import build_scheduler
from dlc_ledger.services.billing import publish_price_book
from ledger.accounts import RATER_SOURCE
from ledger.envelopes import Envelope
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall
from tests.support.letters import listed_letters


def _stored_before_the_bound(base: Envelope, **data: object) -> Envelope:
    """``base`` with ``data`` changed, as a fact stored before its bound existed (the
    envelope's ``data`` is not checked against the catalogue's bounds on append)."""
    fields = base.model_dump(exclude={"data"})
    return Envelope(**{**fields, "event_id": uuid.uuid4(), "data": {**base.data, **data}})


def _rated(store: PostgresEventStore) -> list[tuple[str, str]]:
    rows = query(
        store,
        "SELECT DISTINCT occupancy_id, workspace FROM billing_transactions "
        "WHERE occupancy_id IS NOT NULL ORDER BY occupancy_id",
    )
    return [(str(o), str(w)) for o, w in rows]


def test_an_occupancy_that_cannot_be_rated_is_dead_lettered_and_the_rater_goes_on(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append(
        [
            _stored_before_the_bound(started("pod-bad", at("2026-11-02T00:00")), mgpu=2**50),
            ended("pod-bad", at("2026-11-02T01:00")),
            started("pod-good", at("2026-11-02T00:00"), workspace="ws-b"),
            ended("pod-good", at("2026-11-02T02:00")),
        ]
    )

    # the scheduled job itself (``billing serve``), once, at a cluster instant past both
    # occupancies, before November closes
    now = [at("2026-11-03T00:00")]
    scheduler = build_scheduler(store, lambda: now[0], interval=timedelta(hours=1))
    job = scheduler.get_job("billing-tick")  # type: ignore[attr-defined]
    job.func()

    assert _rated(store) == [("pod-good", "ws-b")]  # 2 GPU-hours at 2.40
    assert [(r["source"], r["reason"], r["count"]) for r in listed_letters(cli)] == [
        (RATER_SOURCE, "rating-failed", 1)
    ]
    letter = listed_letters(cli)[0]
    assert "pod-bad" in str(letter["error"]) and "usage" in str(letter["error"])

    # the process goes on: a later occupancy is rated by the next tick, and November is
    # invoiced for ws-b at its close (the poison, never posted, has nothing to invoice)
    store.append(
        [
            started("pod-next", at("2026-11-10T00:00"), workspace="ws-b"),
            ended("pod-next", at("2026-11-10T01:00")),
        ]
    )
    now[0] = at("2026-12-02T00:00")
    job.func()
    assert _rated(store) == [("pod-good", "ws-b"), ("pod-next", "ws-b")]
    invoiced = query(store, "SELECT workspace, total_minor FROM billing_invoices")
    assert [(str(w), int(t)) for w, t in invoiced] == [("ws-b", 720)]
