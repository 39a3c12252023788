"""Subscriptions that change, as a property against PostgreSQL: any sequence of purchases,
nodes added mid-term, node counts scheduled for the renewal, renewals (by hand and by the
scheduler), changes of spec and cancellations, at increasing instants, then ticks.

After every command the trial balance is zero per currency; for every subscription the
deferred account holds paid - recognised - refunded (each read off the transactions that
touch it: charges, daily recognitions, the cancellation's clearing), what was paid is
what its terms and additions cost, what was refunded is what its cancellation says, and
a subscription over defers nothing; every issued invoice bills what its workspace's
receivable holds for its month (the added nodes' lines included); and at every command's
instant each group's capacity
is the nodes paid for then (the charges' nodes over their spans) x the spec's GPUs.

Each example gets a database of its own (a clone of the migrated template).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import tick
from dlc_ledger.services.subscriptions import (
    add_subscription_nodes,
    cancel,
    change_spec,
    purchase,
    renew,
    resource_groups,
    schedule_subscription_nodes,
)
from ledger.errors import Conflict, Invalid, NotFound
from ledger.events import LedgerTransactionPosted
from ledger.store.postgres import PostgresEventStore
from ledger.subscriptions import deferred_account
from projections.subscriptions import load_subscriptions
from tests.processes.subscriptions.test_scheduler import (
    DB_SETTINGS,
    MINUTE,
    ORIGIN,
    check_invoices,
    fresh_store,
    transactions,
)
from tests.support.billing import query
from tests.support.databases import TemplateDatabases

#: (group, spec, mGPU per node)
GROUPS = (("gpu-g2", "ml.g2.8xlarge", 8000), ("gpu-t4", "ml.t4.2xlarge", 2000))
WORKSPACES = ("ws-a", "ws-b")

Action = tuple[Any, ...]
sub_index = st.integers(0, 5)
purchases = st.tuples(
    st.just("purchase"),
    st.integers(0, 1),
    st.integers(1, 3),
    st.sampled_from(["month", "year"]),
    st.integers(0, 1),
    st.booleans(),
)
actions: st.SearchStrategy[Action] = st.one_of(
    purchases,
    st.tuples(st.just("add"), sub_index, st.integers(1, 3)),
    st.tuples(st.just("change-spec"), sub_index, st.integers(1, 3)),
    st.tuples(st.just("add"), sub_index, st.integers(1, 3)),
    st.tuples(st.just("add"), sub_index, st.integers(1, 3)),
    st.tuples(st.just("schedule"), sub_index, st.integers(1, 4)),
    st.tuples(st.just("renew"), sub_index),
    st.tuples(st.just("schedule"), sub_index, st.integers(1, 4)),
    st.tuples(st.just("renew"), sub_index),
    st.tuples(st.just("change-spec"), sub_index, st.integers(1, 3)),
    st.tuples(st.just("cancel"), sub_index, st.booleans()),
    st.tuples(st.just("tick")),
)
#: minutes to the next command: within a term mostly, sometimes past a renewal
gaps = st.one_of(st.integers(0, 60 * 24 * 10), st.integers(0, 60 * 24 * 40))
#: a purchase first (the changes need something to change), then anything
steps = st.tuples(st.tuples(gaps, purchases), st.lists(st.tuples(gaps, actions), max_size=12)).map(
    lambda first_rest: [first_rest[0], *first_rest[1]]
)


def run(store: PostgresEventStore, when: datetime, action: Action, subs: list[str]) -> None:
    kind = action[0]
    key = f"k{len(subs)}-{when:%Y%m%d%H%M}"
    try:
        if kind == "purchase":
            _, g, nodes, unit, w, auto_renew = action
            group, spec, _ = GROUPS[g]
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
                key=key,
            )
            subs.append(order.subscription.subscription_id)
        elif not subs:
            if kind == "tick":
                tick(store, when)
        elif kind == "add":
            _, i, nodes = action
            add_subscription_nodes(
                store, subs[i % len(subs)], nodes=nodes, key=key, principal="test", at=when
            )
        elif kind == "schedule":
            _, i, nodes = action
            schedule_subscription_nodes(
                store, subs[i % len(subs)], nodes=nodes, principal="test", at=when
            )
        elif kind == "renew":
            renew(store, subs[action[1] % len(subs)], principal="test", at=when)
        elif kind == "change-spec":
            _, i, nodes = action
            old = load_subscriptions(store)[subs[i % len(subs)]]
            group, spec, _ = next(g for g in GROUPS if g[1] != old.spec)
            done = change_spec(
                store,
                old.subscription_id,
                spec=spec,
                group=group,
                nodes=nodes,
                key=key,
                principal="test",
                at=when,
            )
            subs.append(done.new.subscription_id)
        elif kind == "cancel":
            _, i, immediately = action
            cancel(store, subs[i % len(subs)], principal="test", immediately=immediately, at=when)
        elif kind == "tick":
            tick(store, when)
    except (Conflict, Invalid, NotFound):
        pass  # refused (cancelled, expired, renewed ahead, before the books): nothing written


def check_books(store: PostgresEventStore, txns: list[LedgerTransactionPosted]) -> None:
    for currency, total in query(
        store, "SELECT currency, sum(amount_minor) FROM billing_postings GROUP BY currency"
    ):
        assert total == 0, f"trial balance off by {total} {currency}"
    for sub in load_subscriptions(store).values():
        account = deferred_account(sub.subscription_id)
        paid = recognised = refunded = deferred = 0
        for txn in txns:
            legs = {p.account: int(p.amount_minor) for p in txn.postings}
            if account not in legs:
                continue
            deferred += legs[account]
            receivable = legs.get(f"receivable/{sub.workspace}", 0)
            revenue = legs.get(f"revenue/subscription/{sub.spec}", 0)
            assert set(legs) <= {
                account,
                f"receivable/{sub.workspace}",
                f"revenue/subscription/{sub.spec}",
            }, txn
            if txn.charge is not None and txn.charge.kind != "refund":
                paid += receivable
            elif receivable:
                refunded -= receivable
            recognised -= revenue
        assert -deferred == paid - recognised - refunded, sub.subscription_id
        assert paid == sum(part.amount_minor for part, _, _ in sub.parts())
        assert refunded == (sub.cancelled.refund_minor if sub.cancelled is not None else 0)
        assert 0 <= -deferred <= paid


def check_capacity(
    store: PostgresEventStore, txns: list[LedgerTransactionPosted], instants: list[datetime]
) -> None:
    """The groups' capacity at each instant = the nodes charged for spans holding it (a
    term's nodes, nodes added to it) while the subscription runs, x the spec's GPUs."""
    subs = load_subscriptions(store)
    mgpu = {spec: per_node for _, spec, per_node in GROUPS}
    charges = [t.charge for t in txns if t.charge is not None and t.charge.kind != "refund"]
    for instant in instants:
        expected: dict[str, int] = defaultdict(int)
        for charge in charges:
            assert charge is not None
            sub = subs[charge.subscription_id]
            if charge.starts_at <= instant < charge.ends_at and sub.schedulable_at(instant):
                expected[sub.group] += charge.nodes * mgpu[sub.spec]
        held = {
            g.group: sum(v for k, v in g.capacity.items() if k.startswith("gpu/"))
            for g in resource_groups(store, instant)
        }
        for group, _, _ in GROUPS:
            assert held.get(group, 0) == expected.get(group, 0), (instant, group)


@settings(DB_SETTINGS, max_examples=15)
@given(commands=steps, final=st.integers(0, 60 * 24 * 400))
def test_any_history_of_changes_keeps_the_books_and_the_capacity(
    databases: TemplateDatabases, commands: list[tuple[int, Action]], final: int
) -> None:
    with fresh_store(databases) as store:
        subs: list[str] = []
        when = ORIGIN
        instants: list[datetime] = []
        for gap, action in commands:
            when += gap * MINUTE
            run(store, when, action, subs)
            instants += [when, when - timedelta(microseconds=1)]
            check_books(store, transactions(store))
        reach = when + final * MINUTE
        tick(store, reach)
        txns = transactions(store)
        check_books(store, txns)
        check_capacity(store, txns, instants)
        check_invoices(store)  # every issued invoice bills its period's receivable
        books = {str(a): int(b) for a, b in query(
            store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account"
        )}  # fmt: skip
        for sub in load_subscriptions(store).values():
            if not sub.renews() and reach >= sub.ends_at:
                assert books.get(deferred_account(sub.subscription_id), 0) == 0
