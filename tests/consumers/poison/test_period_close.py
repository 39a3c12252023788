"""The period close, in the billing tick (``billing serve``, ``up``): a (workspace, period)
whose invoice cannot be built is dead-lettered (source ``scheduler/close``, reason
``close-failed``) and left open; the other periods are closed.

Poison: a subscription charge stored before the bounds on prices existed (bounds are
checked on new facts only: ``ledger/bounds.py``): one node at 10**14 USD a month, a
fat-fingered price, posted as 10**16 minor units. The invoice's line and total carry it in
whole minor units, beyond the bound of a fact's integer (2**53 - 1): ``make_envelope``
raises ``OutOfBounds``. Before issue 44 that error left the close, its transaction rolled
back, so no workspace was invoiced again, every tick.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from consumers.billing_scheduler import build_scheduler
from dlc_ledger.services.billing import publish_price_book
from ledger.accounts import balanced_transaction, receivable_account, transaction_envelope
from ledger.envelopes import Envelope
from ledger.events import Posting, SubscriptionCharge
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall
from tests.support.letters import listed_letters

#: the fat-fingered monthly price of a node, USD, and what one node's month posts (cents)
PRICE = 10**14
POSTED = PRICE * 100


def _stored_charge(workspace: str) -> Envelope:
    """A subscription's first term charged to ``workspace`` in November at :data:`PRICE`,
    as a fact stored before the bounds on prices existed (the envelope's ``data`` is not
    checked against the catalogue's bounds on append)."""
    when = at("2026-11-02T00:00")
    txn = balanced_transaction(
        f"txn-charge-{workspace}",
        [
            Posting(account=receivable_account(workspace), amount_minor=Decimal(1), currency="USD"),
            Posting(account="deferred/sub-1", amount_minor=Decimal(-1), currency="USD"),
        ],
        period="2026-11",
        memo="subscription sub-1 term 1 ordered (purchase)",
        charge=SubscriptionCharge(
            subscription_id="sub-1",
            term=1,
            kind="purchase",
            workspace=workspace,
            group="gpu-t4",
            spec="ml.t4.2xlarge",
            nodes=1,
            unit="month",
            unit_price=Decimal("0.01"),
            starts_at=when,
            ends_at=at("2026-12-02T00:00"),
        ),
    )
    base = transaction_envelope(txn, when, source="subscriptions")
    data = {
        **base.data,
        "postings": [
            {**base.data["postings"][0], "amount_minor": str(POSTED)},
            {**base.data["postings"][1], "amount_minor": str(-POSTED)},
        ],
        "charge": {**base.data["charge"], "unit_price": str(PRICE)},
    }
    fields = base.model_dump(exclude={"data"})
    return Envelope(**{**fields, "event_id": uuid.uuid4(), "data": data})


def _invoiced(store: PostgresEventStore) -> list[tuple[str, str]]:
    rows = query(store, "SELECT workspace, period FROM billing_invoices ORDER BY workspace")
    return [(str(w), str(p)) for w, p in rows]


def test_a_period_that_cannot_be_closed_is_dead_lettered_and_the_others_close(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append(
        [
            _stored_charge("ws-a"),
            started("pod-a", at("2026-11-02T00:00"), workspace="ws-a"),
            ended("pod-a", at("2026-11-02T01:00")),
            started("pod-b", at("2026-11-02T00:00"), workspace="ws-b"),
            ended("pod-b", at("2026-11-02T02:00")),
        ]
    )

    # the scheduled job itself (``billing serve``), once, at a cluster instant past
    # November's close
    scheduler = build_scheduler(store, lambda: at("2026-12-02T00:00"), interval=timedelta(hours=1))
    job = scheduler.get_job("billing-tick")  # type: ignore[attr-defined]
    job.func()

    assert _invoiced(store) == [("ws-b", "2026-11")]  # 2 GPU-hours at 2.40
    letters = listed_letters(cli)
    assert [(r["source"], r["reason"], r["count"]) for r in letters] == [
        ("scheduler/close", "close-failed", 1)
    ]
    assert "ws-a" in str(letters[0]["error"]) and "OutOfBounds" in str(letters[0]["error"])
    # ws-a's usage was rated all the same: only its invoice waits
    rated = query(store, "SELECT count(*) FROM billing_transactions WHERE occupancy_id = 'pod-a'")
    assert rated[0][0] > 0

    # the next tick tries it again (still failing: the letter is seen again), ws-b stays
    # invoiced once
    job.func()
    assert _invoiced(store) == [("ws-b", "2026-11")]
    assert [r["count"] for r in listed_letters(cli)] == [2]
    # requeue (the next tick) or discard
    assert "tried again" in cli("dead-letters", "retry", str(letters[0]["id"]))
    assert listed_letters(cli) == []
