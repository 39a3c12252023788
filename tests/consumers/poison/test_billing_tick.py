"""The billing tick (``billing serve``, ``up``): a subscription whose renewal cannot be
booked is dead-lettered; the tick renews the others, rates and closes periods.

Poison: a price book published before node prices had a bound (``--force`` then let it
past the plausibility check; the bound now refuses it:
``tests/projections/quotas/test_decimal_bounds.py``) with a monthly node price of 10^20: the next
auto-renewal's term (its unit price, its amount in minor units) breaks its bounds,
``OutOfBounds``. Before issue 44 the error left
:func:`projections.subscriptions.advance` and the whole scheduled job, every minute, so no
subscription renewed, expired or was recognised again and no usage was rated or invoiced
(the job runs ``advance`` before the rater and the close).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from consumers.billing_scheduler import build_scheduler
from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.subscriptions import purchase
from ledger.bounds import OutOfBounds
from ledger.envelopes import Envelope
from ledger.prices import PriceBook
from ledger.store.postgres import PostgresEventStore
from projections.subscriptions import load_subscriptions
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall
from tests.support.letters import listed_letters


def _fat_fingered(book: PriceBook) -> PriceBook:
    assert book.subscriptions is not None
    specs = dict(book.subscriptions)
    specs["ml.t4.2xlarge"] = {**specs["ml.t4.2xlarge"], "monthly": "100000000000000000000"}
    return book.model_copy(
        update={
            "id": "fat-finger",
            "effective_from": at("2027-01-20T00:00"),
            "subscriptions": specs,
        }
    )


def _published_before_the_bound(store: PostgresEventStore, book: PriceBook, at: datetime) -> None:
    """``book``'s events appended as they were before node prices had a bound (the
    envelope's ``data`` is not checked against the catalogue's bounds on append)."""
    section = book.subscription_event()
    assert section is not None
    store.append(
        [
            Envelope(
                event_id=uuid.uuid4(),
                type=fact.type_name,
                schema_version=fact.schema_version,
                stream=f"pricebook/{book.id}",
                occurred_at=at,
                observed_at=at,
                source="api/prices-cli",
                data=fact.model_dump(mode="json"),
            )
            for fact in (book.to_event(), section)
        ]
    )


def test_a_subscription_that_cannot_renew_is_dead_lettered_and_the_tick_goes_on(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    common = {"nodes": 1, "term": "month", "principal": "test", "auto_renew": True}
    bad = purchase(
        store,
        group="gpu-t4",
        spec="ml.t4.2xlarge",
        workspace="ws-a",
        at=at("2027-01-10T00:00"),
        **common,  # type: ignore[arg-type]
    ).subscription.subscription_id
    good = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        workspace="ws-b",
        at=at("2027-01-10T00:00"),
        **common,  # type: ignore[arg-type]
    ).subscription.subscription_id
    with pytest.raises(OutOfBounds, match="monthly"):  # a new book: refused, even forced
        publish_price_book(store, _fat_fingered(demo_book()), at=at("2027-01-20T00:00"), force=True)
    _published_before_the_bound(store, _fat_fingered(demo_book()), at("2027-01-20T00:00"))

    # the scheduled job itself (``billing serve``), once, at a cluster instant past the
    # renewals (due 2027-02-07) and January's close
    scheduler = build_scheduler(store, lambda: at("2027-02-08T00:00"), interval=timedelta(hours=1))
    job = scheduler.get_job("billing-tick")  # type: ignore[attr-defined]
    job.func()

    subs = load_subscriptions(store)
    assert [t.term for t in subs[good].terms] == [1, 2]  # the good one renewed
    assert [t.term for t in subs[bad].terms] == [1]  # the poison one left as it was
    letters = listed_letters(cli)
    assert [(r["source"], r["reason"]) for r in letters] == [
        ("scheduler/subscriptions", "tick-failed")
    ]
    assert bad in str(letters[0]["error"]) and "OutOfBounds" in str(letters[0]["error"])
    # the rest of the tick ran: January is closed, both purchases invoiced
    invoiced = query(store, "SELECT workspace FROM billing_invoices WHERE period = '2027-01'")
    assert sorted(str(w) for (w,) in invoiced) == ["ws-a", "ws-b"]

    # the next tick tries it again: still failing, the letter is seen again
    job.func()
    assert [r["count"] for r in listed_letters(cli)] == [2]
    # requeue (the next tick) or discard
    assert "tried again" in cli("dead-letters", "retry", str(letters[0]["id"]))
    assert listed_letters(cli) == []
