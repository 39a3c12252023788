"""Subscriptions that change (issue 47 part 4), end to end through the CLI on PostgreSQL:
nodes added mid-term (co-terminated, charged by started day at the term's locked price),
a node count applied at the renewal, a change of spec (a new subscription and the old one
refunded, in one transaction); each with its postings, invoice lines, capacity at the
right instant and idempotent by key. Amounts by hand in the comments (docs/subscriptions.md
"Changing a subscription")."""

from __future__ import annotations

import json
from typing import Any

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from ledger.store.postgres import PostgresEventStore
from projections.subscriptions import load_subscriptions
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall


def _balances(store: PostgresEventStore) -> dict[str, int]:
    rows = query(store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account")
    return {str(a): int(b) for a, b in rows}


def _lines(store: PostgresEventStore, period: str) -> list[tuple[str, int]]:
    rows = query(
        store,
        "SELECT description, amount_minor FROM billing_invoice_lines l "
        f"JOIN billing_invoices i USING (invoice_id) WHERE i.period = '{period}' "
        "AND l.resource LIKE 'subscription/%' ORDER BY amount_minor DESC",
    )
    return [(str(d), int(a)) for d, a in rows]


def _group(cli: CliCall, name: str, instant: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        cli("resource-groups", "show", name, "--at", instant, "--format", "json")
    )
    return out[0] if isinstance(out, list) else out


def _buy(cli: CliCall, *args: str) -> str:
    out = cli(
        "subscriptions", "purchase", "--workspace", "ws-ls", "--allow-unknown-workspace", *args
    )
    return out.split()[1].rstrip(":")


def _head(store: PostgresEventStore) -> int:
    return store.head_position()


def test_nodes_added_mid_term(store: PostgresEventStore, cli: CliCall) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(
        cli, "--group", "gpu-g2", "--spec", "ml.g2.8xlarge", "--nodes", "2", "--term", "month",
        "--at", "2027-01-10T00:00:00Z",
    )  # fmt: skip
    add = ("subscriptions", "add-nodes", sub, "--nodes", "1", "--at", "2027-01-20T12:00:00Z")
    out = cli(*add, "--key", "k1")
    # the term runs 2027-01-10 -> 2027-02-10 (31 days); 20.5 days left = 21 started days:
    # 9,800.00 x 21 / 31 x 1 node = 6,638.709... -> 6,638.71
    assert "added 1 node(s)" in out and "6638.71 USD" in out, out
    assert "21 of 31 day(s)" in out and "3 node(s) from then" in out
    head = _head(store)
    assert "already added" in cli(*add, "--key", "k1")  # a retry adds nothing
    assert "already added" in cli(
        "subscriptions", "add-nodes", sub, "--nodes", "1", "--key", "k1"
    )  # a retry without --at: the defaulted instant is not compared
    assert _head(store) == head
    refused = cli("subscriptions", "add-nodes", sub, "--nodes", "2", "--key", "k1", ok=False)
    assert "idempotency key 'k1' added 1 node(s)" in refused
    # the capacity grows at the instant, not before
    before = _group(cli, "gpu-g2", "2027-01-20T11:59:59Z")
    after = _group(cli, "gpu-g2", "2027-01-20T12:00:00Z")
    assert before["subscribed_nodes"] == 2 and "gpu/G2=16,000" in str(before["capacity"])
    assert after["subscribed_nodes"] == 3 and "gpu/G2=24,000" in str(after["capacity"])
    # and ends with the term (co-terminated): no renewal, so nothing after 2027-02-10
    assert _group(cli, "gpu-g2", "2027-02-10T00:00:00Z")["subscribed_nodes"] == 0
    shown = cli("subscriptions", "show", sub, "--at", "2027-01-25T00:00:00Z")
    assert "changes:" in shown and "add-nodes" in shown and "+1 node(s) in term 1" in shown
    assert "6,638.71" in shown

    tick(store, at("2027-02-12T00:00"))  # past the term's end and January's invoice
    books = _balances(store)
    assert books["receivable/ws-ls"] == 1_960_000 + 663_871
    assert books[f"deferred/subscription/{sub}"] == 0  # the addition recognised to zero too
    assert books["revenue/subscription/ml.g2.8xlarge"] == -(1_960_000 + 663_871)
    assert sum(books.values()) == 0
    lines = _lines(store, "2027-01")
    assert [a for _, a in lines] == [1_960_000, 663_871]
    assert lines[1][0].startswith(f"nodes added to {sub} term 1: 1 x ml.g2.8xlarge in gpu-g2")
    assert "2027-01-20 to 2027-02-10" in lines[1][0] and "21 of 31 day(s)" in lines[1][0]


def test_a_cancellation_refunds_the_nodes_added_by_the_rule(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(
        cli, "--group", "gpu-g2", "--spec", "ml.g2.8xlarge", "--nodes", "1", "--term", "year",
        "--at", "2027-01-01T00:00:00Z",
    )  # fmt: skip
    # a year (365 days) at 98,000.00: 1 node added 2027-07-02 00:00 for the 183 days left:
    # 98,000.00 x 183 / 365 = 49,134.246... -> 49,134.25 (the yearly price: the discount kept)
    out = cli(
        "subscriptions", "change", sub, "--nodes", "+1", "--key", "a",
        "--at", "2027-07-02T00:00:00Z",
    )  # fmt: skip
    assert "49134.25 USD" in out and "183 of 365 day(s)" in out, out
    done = cli("subscriptions", "cancel", sub, "--immediately", "--at", "2027-08-01T00:00:00Z")
    # term 1: 212 days used x 9,800.00 / 30 = 69,253.33 consumed, refund 28,746.67;
    # the addition: 30 days used x 9,800.00 / 30 = 9,800.00 consumed, refund 39,334.25
    assert "refund 68080.92 USD" in done, done
    assert "term 1 addition 1: paid 4913425 - consumed 980000" in done
    tick(store, at("2027-08-03T00:00"))
    books = _balances(store)
    assert books[f"deferred/subscription/{sub}"] == 0
    assert books["receivable/ws-ls"] == 9_800_000 + 4_913_425 - 6_808_092
    assert sum(books.values()) == 0


def test_nodes_removed_at_the_renewal(store: PostgresEventStore, cli: CliCall) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(
        cli, "--group", "gpu-g2", "--spec", "ml.g2.8xlarge", "--nodes", "3", "--term", "month",
        "--auto-renew", "--at", "2027-01-10T00:00:00Z",
    )  # fmt: skip
    change = ("subscriptions", "change", sub, "--at", "2027-01-15T00:00:00Z")
    mid_term = cli(*change, "--nodes", "1", ok=False)
    assert "removing nodes mid-term is not refunded" in mid_term
    assert "at least 1 node" in cli(*change, "--nodes", "0", "--at-renewal", ok=False)
    out = cli(*change, "--nodes", "1", "--at-renewal", "--key", "shrink")
    assert "scheduled 1 node(s)" in out and "from term 2" in out, out
    assert "already scheduled" in cli(*change, "--nodes", "1", "--at-renewal", "--key", "shrink")
    other = cli(*change, "--nodes", "2", "--at-renewal", "--key", "shrink", ok=False)
    assert "idempotency key 'shrink' scheduled 1 node(s)" in other
    # without a key: the same count again is the same request, another replaces it (and
    # back again is a change of its own, not the first one's id)
    unkeyed = ("subscriptions", "change", sub, "--at-renewal", "--at", "2027-01-16T00:00:00Z")
    assert "already scheduled" in cli(*unkeyed, "--nodes", "1")
    assert "scheduled 2 node(s)" in cli(*unkeyed, "--nodes", "2")
    assert "scheduled 1 node(s)" in cli(*unkeyed, "--nodes", "1")
    tick(store, at("2027-02-08T00:00"))  # auto-renewal ordered 2027-02-07, 3 days ahead
    (state,) = load_subscriptions(store).values()
    assert [state.nodes_of(t.term) for t in state.terms] == [3, 1]
    assert state.terms[1].amount_minor == 980_000  # the renewal charges 1 x 9,800.00
    # nodes cannot be added while the next term is ordered (it was charged already)
    refused = cli(
        "subscriptions", "add-nodes", sub, "--nodes", "1", "--key", "late",
        "--at", "2027-02-09T00:00:00Z", ok=False,
    )  # fmt: skip
    assert "term 2 ordered already" in refused
    # the capacity drops at the new term's start
    assert _group(cli, "gpu-g2", "2027-02-09T23:59:59Z")["subscribed_nodes"] == 3
    assert _group(cli, "gpu-g2", "2027-02-10T00:00:00Z")["subscribed_nodes"] == 1
    books = _balances(store)
    assert books["receivable/ws-ls"] == 2_940_000 + 980_000
    assert sum(books.values()) == 0
    tick(store, at("2027-03-02T00:00"))
    renewals = [a for d, a in _lines(store, "2027-02") if d.startswith("renewal")]
    assert renewals == [980_000]
    shown = cli("subscriptions", "show", sub, "--format", "json")
    assert json.loads(shown)[0]["nodes"] == 1


def test_a_change_of_spec(store: PostgresEventStore, cli: CliCall) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    old = _buy(
        cli, "--group", "gpu-g2", "--spec", "ml.g2.8xlarge", "--nodes", "1", "--term", "month",
        "--at", "2027-01-10T00:00:00Z",
    )  # fmt: skip
    change = (
        "subscriptions", "change-spec", old, "--spec", "ml.t4.2xlarge", "--nodes", "2",
        "--at", "2027-01-25T00:00:00Z", "--key", "to-t4",
    )  # fmt: skip
    # no group holds the new spec yet: the command asks for one; into the old group (of
    # another spec) it is refused, and refused whole: the old one is not cancelled
    assert "--group G" in cli(*change, ok=False)
    head = _head(store)
    assert "holds nodes of spec" in cli(*change, "--group", "gpu-g2", ok=False)
    assert _head(store) == head and load_subscriptions(store)[old].cancelled is None
    out = cli(*change, "--group", "gpu-t4")
    # the old month: 15 days used x 9,800.00 / 30 = 4,900.00 consumed, refund 4,900.00;
    # the new one: 2 x 2,100.00 = 4,200.00 from 2027-01-25 to 2027-02-25
    assert "changed " in out and "refund 4900.00 USD" in out and "4200.00 USD" in out, out
    head = _head(store)
    assert "already changed" in cli(*change, "--group", "gpu-t4")
    assert _head(store) == head
    other = (*change[:4], "ml.v100m32.8xlarge", *change[5:], "--group", "gpu-v100")
    assert "idempotency key 'to-t4' changed" in cli(*other, ok=False)
    subs = load_subscriptions(store)
    (new,) = [s for s in subs.values() if s.subscription_id != old]
    assert (new.spec, new.group, new.nodes, new.workspace) == (
        "ml.t4.2xlarge",
        "gpu-t4",
        2,
        "ws-ls",
    )
    cancelled = subs[old].cancelled
    assert cancelled is not None and cancelled.refund_minor == 490_000
    # the capacity moves at the instant
    assert _group(cli, "gpu-g2", "2027-01-24T23:59:59Z")["subscribed_nodes"] == 1
    assert _group(cli, "gpu-g2", "2027-01-25T00:00:00Z")["subscribed_nodes"] == 0
    t4 = _group(cli, "gpu-t4", "2027-01-25T00:00:00Z")
    assert t4["subscribed_nodes"] == 2 and "gpu/T4=4,000" in str(t4["capacity"])
    assert _group(cli, "gpu-t4", "2027-01-24T23:59:59Z")["subscribed_nodes"] == 0
    shown = cli("subscriptions", "show", old)
    assert "change-spec" in shown and new.subscription_id in shown
    tick(store, at("2027-02-02T00:00"))
    books = _balances(store)
    assert books["receivable/ws-ls"] == 980_000 - 490_000 + 420_000
    assert books[f"deferred/subscription/{old}"] == 0
    assert sum(books.values()) == 0
    assert [a for _, a in _lines(store, "2027-01")] == [980_000, 420_000, -490_000]


TREE = """
quotas:
  - name: root
    min: {gpu/any: 16000, cpu: 100000, memory: 200000}
    resource_groups: [gpu-g2]
  - name: team
    parent: root
    min: {gpu/any: 16000, cpu: 100000, memory: 200000}
    workspaces: [ws-ls]
"""


def _over(cli: CliCall, instant: str) -> set[str]:
    rows = json.loads(cli("quotas", "list", "--format", "json", "--at", instant))
    return {str(r["quota"]) for r in rows if r["capacity"] == "over"}


def test_the_quota_tree_follows_the_changes(store: PostgresEventStore, cli: CliCall) -> None:
    """The guarantees draw on the group's capacity as the changes leave it, at their
    instants: 16 GPUs guaranteed on 1 node (8 GPUs) are over until a node is added, and
    over again once the spec changes (the group holds nothing)."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _buy(
        cli, "--group", "gpu-g2", "--spec", "ml.g2.8xlarge", "--nodes", "1", "--term", "year",
        "--at", "2027-01-01T00:00:00Z",
    )  # fmt: skip
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"), force=True)
    assert _over(cli, "2027-01-10T00:00:00Z") == {"root"}
    cli("subscriptions", "add-nodes", sub, "--nodes", "1", "--key", "grow",
        "--at", "2027-01-15T00:00:00Z")  # fmt: skip
    assert _over(cli, "2027-01-14T23:59:59Z") == {"root"}
    assert _over(cli, "2027-01-15T00:00:00Z") == set()
    # a tree naming the group is checked against the grown capacity: it fits now
    assert apply_quota_file(store, TREE, principal="test", at=at("2027-01-15T00:00")) is not None
    cli("subscriptions", "change-spec", sub, "--spec", "ml.t4.2xlarge", "--group", "gpu-t4",
        "--key", "t4", "--at", "2027-02-01T00:00:00Z")  # fmt: skip
    assert _over(cli, "2027-01-31T23:59:59Z") == set()
    assert _over(cli, "2027-02-01T00:00:00Z") == {"root"}
