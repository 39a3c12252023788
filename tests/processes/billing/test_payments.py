"""The rules of money for payments (processes/billing/payments.py), under hypothesis: any
sequence of payments (partial, over, repeated) leaves every revenue/* and deferred/* balance
unchanged, and ticks that apply credit balances and mark invoices overdue move nothing into
or out of them (a subscription's daily recognition moves deferred to revenue, nothing
more); the trial balance stays at zero; what each invoice still owes is its total less what
was paid and applied, never below zero; each workspace's receivable is the sum of its
invoices' open amounts, its credit balance what was overpaid and not applied yet, and cash
what was received."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import publish_price_book, record_payment, tick
from dlc_ledger.services.subscriptions import purchase
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.databases import TemplateDatabases

DB_SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
WORKSPACES = ("ws-a", "ws-b")
ISSUED = at("2027-01-02T00:00")


@contextmanager
def invoiced_store(databases: TemplateDatabases) -> Iterator[PostgresEventStore]:
    """Two workspaces, November's and December's invoices issued, every usage final: after
    this, nothing a tick does may move revenue."""
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
        for n, (workspace, start, hours) in enumerate(
            [
                ("ws-a", "2026-11-05T00:00", 10),
                ("ws-a", "2026-12-05T00:00", 5),
                ("ws-b", "2026-11-07T00:00", 3),
                ("ws-b", "2026-12-09T00:00", 7.5),
            ]
        ):
            begin = at(start)
            store.append(
                [
                    started(f"o{n}", begin, workspace=workspace),
                    ended(f"o{n}", begin + timedelta(hours=hours)),
                ]
            )
        # a yearly term bought in November: deferred revenue, recognised day by day
        purchase(
            store, group="gpu-t4", spec="ml.t4.2xlarge", nodes=1, term="year",
            workspace="ws-a", principal="test", at=at("2026-11-10T00:00"), key="year",
        )  # fmt: skip
        assert len(tick(store, ISSUED, due_days=20).invoices) == 4
        yield store
    finally:
        store.close()
        databases.drop(url)


def balances(store: PostgresEventStore) -> dict[str, Decimal]:
    return {
        str(account): Decimal(total)
        for account, total in query(
            store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account"
        )
    }


def invoices(store: PostgresEventStore) -> list[dict[str, Any]]:
    from projections.billing import invoice_page

    with store.reading() as conn:
        return invoice_page(conn, limit=100).rows


Action = tuple[Any, ...]
pays = st.tuples(
    st.just("pay"),
    st.integers(0, 3),  # which invoice
    st.integers(1, 4000),  # minor units
    st.integers(0, 5),  # the reference: a repeat of an earlier one is a retry
)
ticks = st.tuples(st.just("tick"), st.integers(1, 40))  # days after the issue
steps = st.lists(st.one_of(pays, ticks), min_size=1, max_size=12)


@DB_SETTINGS
@given(actions=steps)
def test_payments_never_move_revenue_and_the_books_stay_balanced(
    databases: TemplateDatabases, actions: list[Action]
) -> None:
    with invoiced_store(databases) as store:
        earned = ("revenue/", "deferred/")
        revenue = {k: v for k, v in balances(store).items() if k.startswith(earned)}
        assert [k for k in revenue if k.startswith("deferred/")]
        ids = sorted(i["invoice_id"] for i in invoices(store))
        made: dict[int, tuple[str, int]] = {}  # reference -> (invoice, amount)
        received = 0
        excess = 0
        for action in actions:
            if action[0] == "pay":
                _, which, minor, ref = action
                invoice, amount = made.get(ref, (ids[which], minor))
                result = record_payment(
                    store, invoice, f"{Decimal(amount).scaleb(-2):.2f}", ISSUED, f"ref-{ref}",
                    principal="test",
                )  # fmt: skip
                assert result.created == (ref not in made)
                if result.created:
                    made[ref] = (invoice, amount)
                    received += amount
                    excess += result.payment.excess_minor
                    assert result.payment.applied_minor + result.payment.excess_minor == amount
            else:
                tick(store, ISSUED + timedelta(days=action[1]), due_days=20)
            books = balances(store)
            assert sum(books.values()) == 0  # the trial balance
            now = {k: v for k, v in books.items() if k.startswith(earned)}
            if action[0] == "pay":
                assert now == revenue  # a payment touches no revenue, no deferred revenue
            assert sum(now.values()) == sum(revenue.values())  # recognition only moves it
            revenue = now
            rows = invoices(store)
            for row in rows:
                owed = row["total_minor"] - row["paid_minor"] - row["applied_minor"]
                assert row["open_minor"] == max(owed, 0) and owed >= 0
                assert row["payment_status"] in ("open", "paid", "overdue")
            assert books.get("cash/USD", Decimal(0)) == received
            applied = sum(r["applied_minor"] for r in rows)
            assert (
                -books.get("credit/ws-a", Decimal(0)) - books.get("credit/ws-b", Decimal(0))
                == excess - applied
            )
            for workspace in WORKSPACES:
                mine = [r for r in rows if r["workspace"] == workspace]
                assert books[f"receivable/{workspace}"] == sum(r["open_minor"] for r in mine)
                if action[0] == "tick":  # a credit balance left means nothing is owed
                    credit = -books.get(f"credit/{workspace}", Decimal(0))
                    assert credit == 0 or all(r["open_minor"] == 0 for r in mine)
