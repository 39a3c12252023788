"""Subscriptions against PostgreSQL, as properties: any purchases, renewals and cancels at
increasing instants, then billing ticks at any later instants, in any order, repeated.

After every command and every tick the books balance and no deferred account is owed
more than was charged; each term is ordered (and charged) once whoever ticks, however
often and however concurrently; the no-reason refund is given at most once per paying
workspace per calendar year; and once the ticks reach past a subscription's end, its
deferred revenue account holds exactly zero.

Each example gets a database of its own (a clone of the migrated template), as the other
database properties of this repository do.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.subscriptions import cancel, purchase, renew
from dlc_ledger.services.yaml_files import parse_price_book
from ledger.catalogue import decode
from ledger.errors import Conflict, Invalid
from ledger.events import (
    LedgerTransactionPosted,
    SubscriptionCancelled,
    SubscriptionRenewed,
    SubscriptionTermUnit,
)
from ledger.prices import PriceBook
from ledger.store.postgres import PostgresEventStore
from ledger.subscriptions import (
    NO_REASON_WINDOW,
    RENEWAL_LEAD,
    Subscription,
    UnknownSpec,
    deferred_account,
    recognised_by,
)
from processes.subscriptions import advance
from processes.subscriptions.ticks import RENEWAL_ATTEMPTS
from projections.registry import catch_up_all
from projections.subscriptions import load_specs, load_subscriptions
from tests.support.billing import at, demo_book, query
from tests.support.databases import TemplateDatabases

BOOK_AT = at("2026-10-01T00:00")
ORIGIN = at("2026-11-20T00:00")  # so the examples cross a calendar year (the no-reason rule)
GROUPS = (("gpu-g2", "ml.g2.8xlarge"), ("gpu-t4", "ml.t4.2xlarge"), ("gpu-g2b", "ml.g2.8xlarge"))
WORKSPACES = ("ws-a", "ws-b")
MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)

DB_SETTINGS = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Action = tuple[Any, ...]

units: st.SearchStrategy[SubscriptionTermUnit] = st.sampled_from(["month", "year"])
purchases = st.tuples(
    st.just("purchase"),
    st.integers(0, len(GROUPS) - 1),
    st.integers(1, 3),
    units,
    st.integers(0, len(WORKSPACES) - 1),
    st.booleans(),
)
cancels = st.tuples(st.just("cancel"), st.integers(0, 5), st.booleans())
actions: st.SearchStrategy[Action] = st.one_of(
    purchases,
    cancels,
    purchases,
    cancels,
    st.tuples(st.just("renew"), st.integers(0, 5)),
    st.tuples(st.just("tick")),
    st.tuples(
        st.just("publish"), st.sampled_from(["9800.00", "9800.05", "12000.00"]), st.booleans()
    ),
)
#: minutes to the next command: often within the 5 no-reason days, sometimes a month on
gaps = st.one_of(st.integers(0, 60 * 24 * 6), st.integers(0, 60 * 24 * 45))
steps = st.lists(st.tuples(gaps, actions), min_size=1, max_size=12)
#: the ticks after the commands, minutes after the last one, in any order, repeated; often
#: one past the end of every term that does not renew (a year and a few days on)
final_ticks = st.lists(
    st.one_of(st.integers(0, 60 * 24 * 60), st.integers(60 * 24 * 370, 60 * 24 * 420)),
    min_size=1,
    max_size=4,
)


def price_book(book_id: str, effective_from: datetime, g2_monthly: str, t4_sold: bool) -> PriceBook:
    """A book whose G2 nodes cost ``g2_monthly`` a month (10 months a year), with or without
    the T4 spec (without it, T4 subscriptions cannot renew: retried, then left to expire)."""
    yearly = Decimal(g2_monthly) * 10
    t4 = (
        "  ml.t4.2xlarge: {flavor: gpu/T4, gpus: 2, cpu: 104, memory_gib: 512, "
        'monthly: "2100.00", yearly: "21000.00"}\n'
    )
    return parse_price_book(
        f"""
id: {book_id}
currency: USD
scale: 2
effective_from: "{effective_from.isoformat()}"
rates:
  public: {{gpu/any: "2.40", cpu: "0.048", memory: "0.006"}}
  spot: {{gpu/any: "0.90", cpu: "0.020", memory: "0.002"}}
idle_multiplier: "0.30"
subscriptions:
  ml.g2.8xlarge:
    {{flavor: gpu/G2, gpus: 8, cpu: 96, memory_gib: 384,
      monthly: "{g2_monthly}", yearly: "{yearly}"}}
{t4 if t4_sold else ""}"""
    )


@contextmanager
def fresh_store(databases: TemplateDatabases) -> Iterator[PostgresEventStore]:
    url = databases.clone()
    store = PostgresEventStore(url)
    try:
        publish_price_book(store, demo_book(), at=BOOK_AT)
        yield store
    finally:
        store.close()
        databases.drop(url)


# --- reading the books ------------------------------------------------------------------


def transactions(store: PostgresEventStore) -> list[LedgerTransactionPosted]:
    out: list[LedgerTransactionPosted] = []
    position = 0
    while page := store.read_by_type(["LedgerTransactionPosted"], after_position=position):
        for record in page:
            data = decode(record.envelope)
            assert isinstance(data, LedgerTransactionPosted)
            out.append(data)
        position = page[-1].position
    return out


def subscription_events(store: PostgresEventStore, type_name: str) -> list[Any]:
    return [
        decode(r.envelope) for r in store.read_by_type([type_name], after_position=0, limit=100_000)
    ]


def posted_balances(store: PostgresEventStore) -> dict[str, Decimal]:
    """Every account's balance from the events themselves (the projection aside)."""
    out: dict[str, Decimal] = {}
    for txn in transactions(store):
        for p in txn.postings:
            out[p.account] = out.get(p.account, Decimal(0)) + p.amount_minor
    return {a: b for a, b in out.items() if b != 0}


def projected_balances(store: PostgresEventStore) -> dict[str, Decimal]:
    rows = query(store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account")
    return {str(a): Decimal(b) for a, b in rows if Decimal(b) != 0}


def check_books(store: PostgresEventStore) -> None:
    """The trial balance sums to zero per currency, the projection agrees with the events,
    and no deferred account is owed more than its subscription was charged."""
    for currency, total in query(
        store, "SELECT currency, sum(amount_minor) FROM billing_postings GROUP BY currency"
    ):
        assert total == 0, f"trial balance off by {total} {currency}"
    books = posted_balances(store)
    assert sum(books.values()) == 0
    assert projected_balances(store) == books
    for sub in load_subscriptions(store).values():
        deferred = books.get(deferred_account(sub.subscription_id), Decimal(0))
        assert -sum(t.amount_minor for t in sub.terms) <= deferred <= 0, (sub, deferred)


def utc_midnight(t: datetime) -> datetime:
    t = t.astimezone(UTC)
    return datetime(t.year, t.month, t.day, tzinfo=UTC)


def expected_deferred(sub: Subscription, reach: datetime) -> int:
    """The deferred balance of ``sub`` once ticks reached ``reach``: charged, less each day
    recognised by then (days end at UTC midnights, a term's end or a cancellation), less
    what a cancellation cleared."""
    stop = sub.cancelled.effective_at if sub.cancelled is not None else None
    balance = 0
    for term in sub.terms:
        end = min(term.ends_at, stop) if stop is not None else term.ends_at
        # the last cut the ticks reached: the term's (or the cancellation's) end, else the
        # UTC midnight before ``reach`` (never before the term starts)
        cut = end if reach >= end else max(term.starts_at, min(end, utc_midnight(reach)))
        balance += -term.amount_minor + recognised_by(term, cut)
    if sub.cancelled is not None and sub.cancelled.mode == "immediately":
        when = sub.cancelled.effective_at
        balance += sum(
            t.amount_minor - recognised_by(t, when) for t in sub.terms if t.ends_at > when
        )
    elif sub.cancelled is not None:
        balance += sum(
            t.amount_minor for t in sub.terms if t.starts_at >= sub.cancelled.effective_at
        )
    return balance


def check_terms_ordered_once(store: PostgresEventStore, reach: datetime) -> None:
    """Each term is one ``SubscriptionRenewed`` (term 1: the purchase) and one charge; the
    terms chain; a subscription still renewing has every renewal (or attempt) due by
    ``reach`` booked, and one over by then has expired."""
    renewed = Counter(
        (e.subscription_id, e.next.term)
        for e in subscription_events(store, "SubscriptionRenewed")
        if isinstance(e, SubscriptionRenewed)
    )
    assert all(n == 1 for n in renewed.values()), renewed
    charged = Counter(
        (t.charge.subscription_id, t.charge.term)
        for t in transactions(store)
        if t.charge is not None and t.charge.kind != "refund"
    )
    assert all(n == 1 for n in charged.values()), charged
    refunds = Counter(
        t.charge.subscription_id
        for t in transactions(store)
        if t.charge is not None and t.charge.kind == "refund"
    )
    assert all(n == 1 for n in refunds.values()), refunds
    specs = load_specs(store)
    for sub in load_subscriptions(store).values():
        assert [t.term for t in sub.terms] == list(range(1, len(sub.terms) + 1))
        for term in sub.terms:  # at the price in force when it was ordered
            _, node = specs.spec_at(sub.spec, term.ordered_at)
            assert term.unit_price == (node.monthly if term.unit == "month" else node.yearly)
            assert term.amount_minor == int(term.unit_price * sub.nodes * 100)
        for before, after in pairwise(sub.terms):
            assert after.starts_at == before.ends_at
        for term in sub.terms:
            assert charged[(sub.subscription_id, term.term)] == (1 if term.amount_minor else 0)
        attempts = len(sub.renewal_failures)
        assert attempts <= RENEWAL_ATTEMPTS
        if sub.renews() and attempts < RENEWAL_ATTEMPTS:
            due = sub.last_term.ends_at - RENEWAL_LEAD + attempts * DAY
            assert due > reach, "a renewal (or a retry) due was not attempted"
        if reach >= sub.ends_at and not (sub.cancelled and sub.cancelled.mode == "immediately"):
            assert sub.expired is not None and sub.expired.ended_at == sub.ends_at
    failed = Counter(
        (e.subscription_id, e.term, e.attempt)
        for e in subscription_events(store, "SubscriptionRenewalFailed")
    )
    assert all(n == 1 for n in failed.values()), failed


def check_no_reason_once_a_year(store: PostgresEventStore) -> None:
    subs = load_subscriptions(store)
    given_to: Counter[tuple[str, int]] = Counter()
    for event in subscription_events(store, "SubscriptionCancelled"):  # in store order
        assert isinstance(event, SubscriptionCancelled)
        sub = subs[event.subscription_id]
        key = (sub.workspace, event.effective_at.year)
        first = sub.terms[0]
        eligible = (
            event.mode == "immediately"
            and first.starts_at < event.effective_at < first.ends_at
            and event.effective_at - first.starts_at < NO_REASON_WINDOW
        )
        assert event.no_reason == (eligible and given_to[key] == 0), (event, dict(given_to))
        if event.no_reason:
            given_to[key] += 1
            assert event.refund_minor >= first.amount_minor


def check_invoices(store: PostgresEventStore) -> None:
    """An issued invoice bills what its workspace's receivable holds for its period."""
    owed: Counter[tuple[str, str]] = Counter()
    for txn in transactions(store):
        for p in txn.postings:
            if p.account.startswith("receivable/") and txn.period is not None:
                owed[(p.account.removeprefix("receivable/"), txn.period)] += int(p.amount_minor)
    invoices = query(
        store,
        "SELECT workspace, period, total_minor FROM billing_invoices WHERE status = 'issued'",
    )
    for workspace, period, total in invoices:
        assert total == owed[(workspace, period)], (workspace, period)


def check_deferred(store: PostgresEventStore, reach: datetime) -> None:
    books = posted_balances(store)
    for sub in load_subscriptions(store).values():
        deferred = books.get(deferred_account(sub.subscription_id), Decimal(0))
        assert deferred == expected_deferred(sub, reach), sub.subscription_id
        if not sub.renews() and reach >= sub.ends_at:
            assert deferred == 0, "a subscription over still defers revenue"


# --- running commands -------------------------------------------------------------------


def run(store: PostgresEventStore, when: datetime, action: Action, subs: list[str]) -> None:
    kind = action[0]
    if kind == "publish":
        _, monthly, t4_sold = action
        book = price_book(f"book-{when:%Y%m%d%H%M}", when, monthly, t4_sold)
        with contextlib.suppress(Invalid):  # another book takes effect at that instant
            publish_price_book(store, book, at=when)
        return
    try:
        if kind == "purchase":
            _, g, nodes, unit, w, auto_renew = action
            group, spec = GROUPS[g]
            order = purchase(
                store,
                group=group,
                spec=spec,
                nodes=nodes,
                term=unit,
                workspace=WORKSPACES[w],
                principal="test",
                auto_renew=auto_renew,
                at=when,
                key=f"k{len(subs)}",
            )
            subs.append(order.subscription.subscription_id)
        elif kind == "cancel" and subs:
            _, i, immediately = action
            cancel(store, subs[i % len(subs)], principal="test", immediately=immediately, at=when)
        elif kind == "renew" and subs:
            renew(store, subs[action[1] % len(subs)], principal="test", at=when)
        elif kind == "tick":
            tick(store, when)
    except (Conflict, UnknownSpec):
        pass  # cancelled, expired, already renewed, or not sold: refused, nothing written


@DB_SETTINGS
@given(commands=steps, finals=final_ticks)
def test_any_history_keeps_the_books(
    databases: TemplateDatabases, commands: list[tuple[int, Action]], finals: list[int]
) -> None:
    with fresh_store(databases) as store:
        subs: list[str] = []
        when = ORIGIN
        for gap, action in commands:
            when += gap * MINUTE
            run(store, when, action, subs)
            check_books(store)
        reach = when
        for minutes in finals:
            instant = when + minutes * MINUTE
            tick(store, instant)
            reach = max(reach, instant)
            check_books(store)
        check_terms_ordered_once(store, reach)
        check_no_reason_once_a_year(store)
        check_deferred(store, reach)
        check_invoices(store)


# --- the scheduler, repeated and concurrent ---------------------------------------------


def in_threads(*calls: Callable[[], object]) -> None:
    """Each call in a thread of its own, all released at once."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def work(call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


@settings(DB_SETTINGS, max_examples=5)
@given(
    buys=st.lists(st.tuples(st.integers(0, 60 * 24 * 40), units, st.integers(1, 3)), max_size=3),
    first=st.integers(60 * 24 * 28, 60 * 24 * 200),
    second=st.integers(0, 60 * 24 * 100),
)
def test_auto_renewal_orders_each_term_once_however_often_and_concurrently_advanced(
    databases: TemplateDatabases,
    buys: Sequence[tuple[int, SubscriptionTermUnit, int]],
    first: int,
    second: int,
) -> None:
    with fresh_store(databases) as store:
        for i, (offset, unit, nodes) in enumerate([(0, "month", 1), *buys]):
            group, spec = GROUPS[i % len(GROUPS)]
            purchase(
                store,
                group=group,
                spec=spec,
                nodes=nodes,
                term=unit,
                workspace=WORKSPACES[i % 2],
                principal="test",
                auto_renew=True,
                at=ORIGIN + offset * MINUTE,
                key=f"k{i}",
            )
        now = ORIGIN + first * MINUTE
        done = advance(store, now)
        head = store.head_position()
        again = advance(store, now)  # the same instant again: nothing more to book
        assert store.head_position() == head
        assert (again.renewed, again.expired, again.recognised) == (0, 0, 0)
        assert done.renewed >= 1  # the first month's renewal was due (28 days on at least)
        in_threads(lambda: advance(store, now), lambda: advance(store, now))  # still nothing
        assert store.head_position() == head
        later = now + second * MINUTE
        between = now + second // 2 * MINUTE
        # schedulers racing to book the same days and renewals, at one instant or two
        in_threads(lambda: advance(store, later), lambda: advance(store, later))
        in_threads(*(lambda t=t: advance(store, t) for t in (between, later, later)))
        catch_up_all(store)
        check_books(store)
        check_terms_ordered_once(store, later)
        check_deferred(store, later)
        tick(store, later)  # the billing close of what they booked
        check_books(store)


# --- races between a command and the scheduler -----------------------------------------

#: what the services read the subscriptions with: wrapped below to run a concurrent write
#: between a command's read and its append (the interleaving two processes may produce)
SERVICES_LOAD = "dlc_ledger.services.subscriptions.orders.load_subscriptions"


def test_a_cancel_racing_the_scheduler_still_refunds_the_renewal(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_price_book(store, demo_book(), at=BOOK_AT)
    start = at("2027-01-10T00:00")
    order = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-a",
        principal="test",
        auto_renew=True,
        at=start,
    )
    sub = order.subscription.subscription_id
    now = at("2027-02-08T12:00")  # 2 days before the end: the renewal is due (02-07)
    load = load_subscriptions
    scheduler: list[threading.Thread] = []

    def read_then_the_scheduler_ticks(source: Any) -> dict[str, Subscription]:
        state = load(source)
        # the scheduler ticks between the cancel's read and its append: it must wait for
        # the cancel (both decide under the store's append lock)
        thread = threading.Thread(target=advance, args=(store, now))
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive(), "the scheduler did not wait for the cancel's decision"
        scheduler.append(thread)
        return state

    monkeypatch.setattr(SERVICES_LOAD, read_then_the_scheduler_ticks)
    cancel(store, sub, principal="test", immediately=True, at=now)
    monkeypatch.undo()
    (thread,) = scheduler
    thread.join(timeout=30)
    assert not thread.is_alive()
    tick(store, at("2027-04-01T00:00"))
    (state,) = load_subscriptions(store).values()
    assert len(state.terms) == 1  # cancelled first: the scheduler renewed nothing after it
    books = posted_balances(store)
    assert books.get(deferred_account(sub), Decimal(0)) == 0


def test_two_racing_cancels_get_one_no_reason_refund(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_price_book(store, demo_book(), at=BOOK_AT)
    start = at("2027-03-01T00:00")
    subs = [
        purchase(
            store,
            group=f"gpu-{i}",
            spec="ml.t4.2xlarge",
            nodes=1,
            term="month",
            workspace="ws-a",
            principal="test",
            at=start,
            key=str(i),
        ).subscription.subscription_id
        for i in range(2)
    ]
    now = start + 2 * DAY
    load = load_subscriptions
    other: list[threading.Thread] = []

    def read_then_the_other_cancels(source: Any) -> dict[str, Subscription]:
        state = load(source)
        if not other:  # the other cancel, between this one's read and its append, waits
            thread = threading.Thread(
                target=cancel,
                args=(store, subs[1]),
                kwargs={"principal": "other", "immediately": True, "at": now},
            )
            other.append(thread)
            thread.start()
            thread.join(timeout=1.0)
            assert thread.is_alive(), "the other cancel did not wait for this one's decision"
        return state

    monkeypatch.setattr(SERVICES_LOAD, read_then_the_other_cancels)
    first = cancel(store, subs[0], principal="test", immediately=True, at=now)
    other[0].join(timeout=30)
    monkeypatch.undo()
    assert first.refund.no_reason
    check_no_reason_once_a_year(store)
    second = load_subscriptions(store)[subs[1]].cancelled
    assert second is not None and not second.no_reason


def test_a_backdated_cancel_is_refused_or_keeps_the_books(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=BOOK_AT)
    sub = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-a",
        principal="test",
        at=at("2027-01-10T00:00"),
    ).subscription.subscription_id
    tick(store, at("2027-02-01T00:00"))  # recognised to 02-01
    try:
        cancel(store, sub, principal="test", immediately=True, at=at("2027-01-20T00:00"))
    except (Conflict, Invalid):
        return  # refused: what a fix may do
    tick(store, at("2027-03-01T00:00"))
    assert posted_balances(store).get(deferred_account(sub), Decimal(0)) == 0
