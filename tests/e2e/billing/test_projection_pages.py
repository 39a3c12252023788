"""Billing projection pages: first start / first end win within a page and across pages,
an end before its start, duplicate transactions counted in the totals but stored once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from consumers.projector import Projector
from ledger.envelopes import EventData, make_envelope
from ledger.events import (
    LedgerTransactionPosted,
    OccupancyEnded,
    OccupancyStarted,
    Posting,
    RatedUsage,
)
from ledger.store.postgres import PostgresEventStore
from projections.billing.projection import BillingProjection

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _env(n: int, data: EventData) -> object:
    return make_envelope(
        data,
        event_id=uuid.UUID(int=n + 1),
        stream="job/j1",
        occurred_at=T0 + timedelta(seconds=n),
        observed_at=T0,
        source="test",
    )


def _start(mgpu: int, at: int) -> OccupancyStarted:
    return OccupancyStarted(
        occupancy_id="o1", job_uid="j1", pod_uid="p1", mgpu=mgpu, cpu_milli=1, memory_mib=1,
        workspace="ws", started_at=T0 + timedelta(seconds=at),
    )  # fmt: skip


def _end(at: int, estimated: bool = False) -> OccupancyEnded:
    return OccupancyEnded(
        occupancy_id="o1", job_uid="j1", pod_uid="p1",
        ended_at=T0 + timedelta(seconds=at), estimated=estimated,
    )  # fmt: skip


def _txn(amount: int) -> LedgerTransactionPosted:
    usage = RatedUsage(
        occupancy_id="o1", job_uid="j1", workspace="ws", resource="cpu", billing_mode="public",
        usage_period="2026-11", unit="core-hour", usage=10, quantity="0.5",
        as_of=T0 + timedelta(seconds=amount),
    )  # fmt: skip
    postings = (
        Posting(account="receivable/ws", amount_minor=amount, currency="EUR"),
        Posting(account="revenue/cpu", amount_minor=-amount, currency="EUR"),
    )
    return LedgerTransactionPosted(transaction_id="t1", postings=postings, usage=usage)


@pytest.mark.parametrize("page_size", [1, 2, 100])
def test_first_halves_win_and_duplicates_are_summed(
    store: PostgresEventStore, page_size: int
) -> None:
    events = [_end(50), _start(1000, 10), _start(2000, 20), _end(60), _txn(7), _txn(5)]
    store.append([_env(n, e) for n, e in enumerate(events)])  # type: ignore[misc]
    Projector(store, [BillingProjection()], page_size=page_size).catch_up()
    with store.engine.connect() as conn:
        occ = conn.execute(
            text("SELECT mgpu, started_at, ended_at, rated_to FROM billing_occupancies")
        ).one()
        assert occ == (1000, T0 + timedelta(seconds=10), T0 + timedelta(seconds=50),
                       T0 + timedelta(seconds=7))  # fmt: skip
        txn = conn.execute(text("SELECT amount_minor FROM billing_transactions")).all()
        assert txn == [(7,)]
        totals = conn.execute(text("SELECT usage, amount_minor FROM billing_line_totals")).one()
        assert totals == (20, 12)
        assert conn.execute(text("SELECT count(*) FROM billing_postings")).scalar_one() == 2
