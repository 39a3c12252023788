"""A subscription's life in the books: ordered in full into deferred revenue, recognised
day by day, renewed automatically once, refunded by the rule, invoiced beside usage."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.subscriptions import cancel, purchase, renew
from ledger.errors import Conflict, NotFound
from ledger.store.postgres import PostgresEventStore
from projections.billing.balances import read_books
from projections.billing.reads import currency_scales
from projections.subscriptions import load_subscriptions
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall


def _balances(store: PostgresEventStore) -> dict[str, int]:
    rows = query(
        store,
        "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account",
    )
    return {str(a): int(b) for a, b in rows}


def _buy(store: PostgresEventStore, **kw: object) -> str:
    args: dict[str, object] = {
        "group": "gpu-g2",
        "spec": "ml.g2.8xlarge",
        "nodes": 2,
        "term": "month",
        "workspace": "ws-ls",
        "principal": "test",
        "at": at("2027-01-10T00:00"),
    }
    args.update(kw)
    return purchase(store, **args).subscription.subscription_id  # type: ignore[arg-type]


def test_a_month_is_billed_in_full_and_recognised_to_zero(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store)
    tick(store, at("2027-02-12T00:00"))  # past the term's end (2027-02-10) and January's close
    books = _balances(store)
    assert books["receivable/ws-ls"] == 2 * 980_000  # 2 nodes x 9,800.00
    assert books[f"deferred/subscription/{sub}"] == 0  # all recognised by the term's end
    assert books["revenue/subscription/ml.g2.8xlarge"] == -2 * 980_000
    assert sum(books.values()) == 0
    (line,) = query(
        store,
        "SELECT description, amount_minor FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.period = '2027-01'",
    )
    assert line[1] == 1_960_000 and "subscription" in line[0] and sub in line[0]
    (expired,) = [s for s in load_subscriptions(store).values()]
    assert expired.expired is not None and expired.expired.ended_at == at("2027-02-10T00:00")


def test_auto_renewal_orders_once_three_days_ahead(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store, auto_renew=True)
    for _ in range(2):  # a repeated tick renews nothing more
        tick(store, at("2027-02-08T00:00"))
    (state,) = load_subscriptions(store).values()
    assert [t.term for t in state.terms] == [1, 2]
    assert state.terms[1].ordered_at == at("2027-02-07T00:00")
    assert state.terms[1].starts_at == at("2027-02-10T00:00")
    with pytest.raises(Conflict, match="already renewed"):
        renew(store, sub, principal="test", at=at("2027-02-08T00:00"))
    tick(store, at("2027-05-01T00:00"))  # a replay ticking once books every month's renewal
    (state,) = load_subscriptions(store).values()
    assert [t.starts_at.month for t in state.terms] == [1, 2, 3, 4]  # May's is due 05-07


def test_cancel_immediately_refunds_by_the_rule(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store, term="year", nodes=1)
    done = cancel(store, sub, principal="test", immediately=True, at=at("2027-03-01T12:00"))
    # 51 days used (each started day counts) x 9,800.00 / 30 = 16,660.00 consumed
    assert done.refund.amount_minor == 9_800_000 - 1_666_000
    tick(store, at("2027-04-05T00:00"))
    books = _balances(store)
    assert books[f"deferred/subscription/{sub}"] == 0
    assert books["receivable/ws-ls"] == 9_800_000 - done.refund.amount_minor
    assert -books["revenue/subscription/ml.g2.8xlarge"] == 1_666_000
    with pytest.raises(Conflict, match="already cancelled"):
        cancel(store, sub, principal="test", immediately=True, at=at("2027-03-02T00:00"))


def test_the_five_day_refund_is_full_once_a_year(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    first = _buy(store, key="a")
    second = _buy(store, key="b", at=at("2027-06-01T00:00"))
    one = cancel(store, first, principal="test", immediately=True, at=at("2027-01-12T00:00"))
    two = cancel(store, second, principal="test", immediately=True, at=at("2027-06-02T00:00"))
    assert one.refund.no_reason and one.refund.amount_minor == 1_960_000
    assert not two.refund.no_reason and two.refund.amount_minor < 1_960_000


def test_the_no_reason_refund_counts_in_the_year_it_was_used(store: PostgresEventStore) -> None:
    """Bought on 29 December, refunded on 2 January: the no-reason refund is the new
    year's, so a second one that year is refused, though the first purchase was the old
    year's (a rule counting by the purchase's year would grant it twice)."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    december = _buy(store, key="dec", at=at("2027-12-29T00:00"))
    march = _buy(store, key="mar", at=at("2028-03-01T00:00"))
    one = cancel(store, december, principal="test", immediately=True, at=at("2028-01-02T00:00"))
    two = cancel(store, march, principal="test", immediately=True, at=at("2028-03-02T00:00"))
    assert one.refund.no_reason
    assert not two.refund.no_reason and two.refund.amount_minor < 1_960_000
    later = _buy(store, key="next-year", at=at("2029-02-01T00:00"))
    three = cancel(store, later, principal="test", immediately=True, at=at("2029-02-02T00:00"))
    assert three.refund.no_reason  # a new calendar year, a new one


def test_the_books_at_an_instant_include_a_posting_at_that_instant(
    store: PostgresEventStore,
) -> None:
    """``ledger balance --at T`` counts what occurred by T, T itself included."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    bought = at("2027-01-10T00:00")
    _buy(store, at=bought)  # its charge posts at the purchase's instant

    def receivable(instant: datetime) -> str:
        with store.reading() as conn:
            books = read_books(conn, currency_scales(conn), instant)
        rows = {r["account"]: r["balance"] for r in books.balance.rows}
        return str(rows.get("receivable/ws-ls", "none"))

    assert receivable(bought) == "19600"  # 2 nodes x 9,800.00, at full precision
    assert receivable(bought - timedelta(microseconds=1)) == "none"


def test_guards(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    with pytest.raises(NotFound, match=r"unknown node spec 'nope'.*ml\.g2\.8xlarge"):
        _buy(store, spec="nope")
    _buy(store)
    with pytest.raises(Conflict, match="identical purchase"):
        _buy(store)
    assert _buy(store, key="k") == _buy(store, key="k")  # a key makes a repeat a no-op
    with pytest.raises(Conflict, match="holds nodes of spec"):
        _buy(store, spec="ml.t4.2xlarge", key="other")
    with pytest.raises(NotFound):
        cancel(store, "sub-nope", principal="test")


def test_cli_purchase_list_and_cancel(store: PostgresEventStore, cli: CliCall) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    order = (
        "subscriptions",
        "purchase",
        "--group",
        "gpu-t4",
        "--spec",
        "ml.t4.2xlarge",
        "--nodes",
        "3",
        "--term",
        "year",
        "--workspace",
        "ws-g",
        "--auto-renew",
        "--at",
        "2027-01-01T00:00:00Z",
    )
    # ws-g: no quota binds it, no job ran in it: refused unless said on purpose (issue 44)
    for dry in ((), ("--dry-run",)):
        refused = cli(*order, *dry, ok=False)
        assert "workspace: unknown workspace(s) ws-g" in refused and "known: none" in refused
    bad_group = cli(*order[:2], "--group", "g\nx", *order[4:], ok=False)
    assert "group: control character '\\n'" in bad_group
    assert load_subscriptions(store) == {}
    out = cli(*order, "--allow-unknown-workspace")
    assert "bought sub-" in out and "63,000.00 USD" in out.replace("63000", "63,000")
    rows = json.loads(cli("subscriptions", "list", "--format", "json", "--at", "2027-02-01"))
    assert rows[0]["status"] == "active" and rows[0]["nodes"] == 3
    groups = json.loads(cli("resource-groups", "list", "--format", "json", "--at", "2027-02-01"))
    (g,) = [g for g in groups if g["group"] == "gpu-t4"]
    assert g["subscribed_nodes"] == 3 and "gpu/T4=6,000" in g["capacity"]
    out = cli("subscriptions", "cancel", rows[0]["subscription_id"], "--at", "2027-02-01")
    assert "capacity ends 2028-01-01" in out
    _ = timedelta
