"""The rules of money for payments (processes/billing/payments.py), under hypothesis: any
sequence of payments (partial, over, repeated), credit notes and voids leaves every
revenue/* and deferred/* balance unchanged by a payment, and ticks that return
over-settlements, apply credit balances and mark invoices overdue move nothing into or out
of them (a subscription's daily recognition moves deferred to revenue, a re-issue its
rounding back, nothing more); the trial balance stays at zero; what each invoice still
owes is its total less what its period had credited, paid and applied, plus what it
returned to the credit balance, never below zero, and after a tick exactly that (nothing
clipped); after a tick with no voided period waiting for its re-issue, each workspace's
receivable is the sum of its invoices' open amounts (so never negative); its credit
balance is what was overpaid or returned and not applied yet, and cash what was
received."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import (
    issue_credit_note,
    publish_price_book,
    record_payment,
    tick,
    void_invoice,
)
from dlc_ledger.services.subscriptions import purchase
from ledger.errors import Conflict
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
credits = st.tuples(st.just("credit"), st.integers(0, 3), st.integers(1, 1500))
voids = st.tuples(st.just("void"), st.integers(0, 3))
steps = st.lists(st.one_of(pays, ticks, credits, voids), min_size=1, max_size=12)


def current(rows: list[dict[str, Any]], period: tuple[str, str]) -> str | None:
    """The issued revision of a (workspace, period), None while a void awaits its re-issue."""
    issued = [r["invoice_id"] for r in rows if (r["workspace"], r["period"]) == period]
    live = [r for r in rows if r["invoice_id"] in issued and r["status"] == "issued"]
    return str(live[0]["invoice_id"]) if live else None


@DB_SETTINGS
@given(actions=steps)
# over-settled: ws-b's November paid in full then credited; and paid, credited, voided,
# re-issued (the excess returned at the tick and applied to December's invoice)
@example(actions=[("pay", 2, 4000, 0), ("credit", 2, 500), ("tick", 1), ("credit", 2, 100)])
@example(actions=[("pay", 2, 4000, 0), ("credit", 2, 300), ("void", 2), ("tick", 2), ("tick", 3)])
def test_payments_never_move_revenue_and_the_books_stay_balanced(
    databases: TemplateDatabases, actions: list[Action]
) -> None:
    with invoiced_store(databases) as store:
        earned = ("revenue/", "deferred/")
        revenue = {k: v for k, v in balances(store).items() if k.startswith(earned)}
        assert [k for k in revenue if k.startswith("deferred/")]
        periods = sorted((i["workspace"], i["period"]) for i in invoices(store))
        made: dict[int, tuple[str, int]] = {}  # reference -> (invoice, amount)
        received = 0
        excess = 0
        credited = 0
        voided = False  # a void since the last tick: its period awaits the re-issue
        for action in actions:
            target = current(invoices(store), periods[action[1]]) if action[0] != "tick" else None
            if action[0] == "pay":
                _, _, minor, ref = action
                if ref not in made and target is None:
                    continue  # a voided period is paid on its re-issue
                invoice, amount = made.get(ref, (target, minor))
                assert invoice is not None
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
            elif action[0] == "credit":
                if target is None:
                    continue
                try:
                    issue_credit_note(
                        store, target, f"{Decimal(action[2]).scaleb(-2):.2f}", "goodwill",
                        principal="test", idempotency_key=f"c-{len(actions)}-{credited}",
                    )  # fmt: skip
                except Conflict:
                    continue  # beyond what the period has left to credit
                credited += action[2]
            elif action[0] == "void":
                if target is None:
                    continue
                void_invoice(store, target, "wrong", principal="test")
                voided = True
            else:
                tick(store, ISSUED + timedelta(days=action[1]), due_days=20)
            books = balances(store)
            assert sum(books.values()) == 0  # the trial balance
            now = {k: v for k, v in books.items() if k.startswith(earned)}
            if action[0] == "pay":
                assert now == revenue  # a payment touches no revenue, no deferred revenue
            if action[0] == "tick":
                if not voided:  # recognition only moves it (a re-issue re-posts rounding)
                    assert sum(now.values()) == sum(revenue.values())
                voided = False
            revenue = now
            rows = invoices(store)
            for row in rows:
                same = [r for r in rows if (r["workspace"], r["period"]) == (
                    row["workspace"], row["period"])]  # fmt: skip
                owed = row["total_minor"] - sum(
                    r["credited_minor"] + r["paid_minor"] + r["applied_minor"] - r["returned_minor"]
                    for r in same
                )
                if row["status"] == "voided":
                    assert row["open_minor"] == 0
                    continue
                assert row["open_minor"] == max(owed, 0)
                if action[0] == "tick":
                    assert owed >= 0  # an over-settlement was returned: nothing clipped
                assert row["payment_status"] in ("open", "paid", "overdue")
            assert books.get("cash/USD", Decimal(0)) == received
            applied = sum(r["applied_minor"] for r in rows)
            returned = sum(r["returned_minor"] for r in rows)
            assert (
                -books.get("credit/ws-a", Decimal(0)) - books.get("credit/ws-b", Decimal(0))
                == excess + returned - applied
            )
            if action[0] != "tick":
                continue
            for workspace in WORKSPACES:
                mine = [r for r in rows if r["workspace"] == workspace]
                receivable = books[f"receivable/{workspace}"]
                assert receivable == sum(r["open_minor"] for r in mine) >= 0
                # a credit balance left means nothing is owed
                credit = -books.get(f"credit/{workspace}", Decimal(0))
                assert credit == 0 or all(r["open_minor"] == 0 for r in mine)
