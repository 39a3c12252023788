"""SLA credits end to end: a book with a delivery commitment, a subscribed group whose
nodes are cordoned, removed and blip for less than the grace; the billing tick credits
the undelivered node-hours at the term's node-hour price, once, on the next invoice; the
report shows delivered against subscribed."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.subscriptions import cancel, purchase
from dlc_ledger.services.yaml_files import parse_price_book
from ledger.canonical import canonical_json
from ledger.envelopes import Envelope, make_envelope
from ledger.errors import Invalid
from ledger.events import NodeCordoned, NodeRegistered, NodeRemoved
from ledger.ids import fact_event_id
from ledger.prices import PriceBook
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall

#: 7,440.00 a node-month: a 31-day month is 744 hours, so a node-hour is 10.00
SLA_BOOK = """
id: sla-2027
currency: USD
scale: 2
effective_from: "2026-10-01T00:00:00Z"
rates:
  public: {gpu/any: "2.40", cpu: "0.048", memory: "0.006"}
idle_multiplier: "0.30"
subscriptions:
  ml.g2.8xlarge:
    flavor: gpu/G2
    gpus: 8
    cpu: 96
    memory_gib: 384
    monthly: "7440.00"
    yearly: "74400.00"
    sla: {grace_minutes: 15}
"""


def sla_book() -> PriceBook:
    return parse_price_book(SLA_BOOK)


def node_fact(data: NodeRegistered | NodeCordoned | NodeRemoved, when: str) -> Envelope:
    name = data.node
    t = at(when)
    return make_envelope(
        data,
        event_id=fact_event_id(
            "test", "Node", name, f"{data.type_name}@{when}/{getattr(data, 'cordoned', '')}"
        ),
        stream=f"node/{name}",
        occurred_at=t,
        observed_at=t,
        source="kube-watcher/test",
    )


def register(name: str, when: str, group: str = "gpu-g2") -> Envelope:
    return node_fact(
        NodeRegistered(
            node=name, resource_group=group, gpus=8, cpu_milli=96_000, memory_mib=393_216
        ),
        when,
    )


def cordon(name: str, when: str, cordoned: bool = True) -> Envelope:
    return node_fact(NodeCordoned(node=name, cordoned=cordoned), when)


def remove(name: str, when: str) -> Envelope:
    return node_fact(NodeRemoved(node=name), when)


def _buy(store: PostgresEventStore, nodes: int, when: str, key: str) -> str:
    return purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=nodes,
        term="month",
        workspace="ws-ls",
        principal="test",
        at=at(when),
        key=key,
    ).subscription.subscription_id


def _outages(store: PostgresEventStore) -> None:
    store.append(
        [
            *(register(n, "2026-12-31T00:00") for n in ("n1", "n2", "n3")),
            # n1 cordoned 10 hours: 10 node-hours
            cordon("n1", "2027-01-05T00:00"),
            cordon("n1", "2027-01-05T10:00", cordoned=False),
            # n2 blips 10 minutes, under the 15-minute grace: not counted
            cordon("n2", "2027-01-10T00:00"),
            cordon("n2", "2027-01-10T00:10", cordoned=False),
            # n3 removed from 20 January to the term's end: 12 days, 288 node-hours
            remove("n3", "2027-01-20T00:00"),
            # during it, n2 blips 5 minutes: the second node short is under the grace
            cordon("n2", "2027-01-25T00:00"),
            cordon("n2", "2027-01-25T00:05", cordoned=False),
        ]
    )


def _balances(store: PostgresEventStore) -> dict[str, int]:
    rows = query(store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY account")
    return {str(a): int(b) for a, b in rows}


def test_undelivered_node_hours_are_credited_once_on_the_invoice(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store, 3, "2027-01-01T00:00", "a")
    _outages(store)
    first = tick(store, at("2027-03-05T00:00"))  # past the term, and February's close
    again = tick(store, at("2027-03-05T00:00"))
    ((data,),) = query(store, "SELECT data FROM events WHERE type = 'SlaCreditIssued'")
    # 298 node-hours x 10.00 a node-hour
    assert data["amount_minor"] == 298_000
    assert (
        data["undelivered_node_seconds"] == str(298 * 3600) + ".000000"
        or float(data["undelivered_node_seconds"]) == 298 * 3600
    )
    assert {d["node"] for d in data["down_nodes"]} >= {"n1", "n3"}
    books = _balances(store)
    assert books["revenue/sla-credits/ml.g2.8xlarge"] == 298_000
    assert books["receivable/ws-ls"] == 3 * 744_000 - 298_000
    assert sum(books.values()) == 0
    (line,) = query(
        store,
        "SELECT l.description, l.amount_minor, l.quantity, l.unit FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.period = '2027-02' "
        "AND l.description LIKE 'SLA credit%%'",
    )
    assert line[1] == -298_000 and float(line[2]) == -298 and line[3] == "node-hour"
    assert sub in line[0] and "n3" in line[0]
    assert first is not None and again is not None
    # a re-run adds nothing
    count = query(store, "SELECT count(*) FROM events")[0][0]
    tick(store, at("2027-03-06T00:00"))
    assert query(store, "SELECT count(*) FROM events WHERE type = 'SlaCreditIssued'")[0][0] == 1
    assert query(store, "SELECT count(*) FROM events")[0][0] >= count


def test_the_latest_purchase_bears_the_shortfall(store: PostgresEventStore) -> None:
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    older = _buy(store, 2, "2027-01-01T00:00", "old")
    newer = _buy(store, 1, "2027-01-01T01:00", "new")  # an hour later, to 02-01T01:00
    _outages(store)
    tick(store, at("2027-02-03T00:00"))
    rows = query(
        store,
        "SELECT data->>'subscription_id', (data->>'amount_minor')::int FROM events "
        "WHERE type = 'SlaCreditIssued'",
    )
    credits = dict(rows)
    # the newer (1 node) is short first: all 298 node-hours (never 2 nodes short at once
    # beyond the grace; after the older ends at 02-01T00:00, 2 nodes serve the newer's 1);
    # the older is delivered in full
    assert credits == {newer: 298_000, older: 0}


def test_a_book_without_sla_publishes_the_same_bytes_and_credits_nothing(
    store: PostgresEventStore,
) -> None:
    # the demo book (no commitment) publishes the bytes it did before SLAs existed
    demo = demo_book().subscription_event()
    assert demo is not None
    assert hashlib.sha256(canonical_json(demo.model_dump(mode="json"))).hexdigest() == (
        "21c571a38137c853931b15545f098874478eb822e049d4d4b728f66439e7414f"
    )
    plain = parse_price_book(SLA_BOOK.replace("    sla: {grace_minutes: 15}\n", ""))
    event = plain.subscription_event()
    assert event is not None
    assert '"sla"' not in canonical_json(event.model_dump(mode="json")).decode()
    with_sla = sla_book().subscription_event()
    assert with_sla is not None
    assert with_sla.specs["ml.g2.8xlarge"].sla is not None
    publish_price_book(store, plain, at=at("2026-10-01T00:00"))
    _buy(store, 3, "2027-01-01T00:00", "a")
    _outages(store)
    tick(store, at("2027-02-03T00:00"))
    assert query(store, "SELECT count(*) FROM events WHERE type = 'SlaCreditIssued'")[0][0] == 0


def test_report_shows_delivered_against_subscribed(
    store: PostgresEventStore, cli: CliCall, client: TestClient, tokens: dict[str, str]
) -> None:
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store, 3, "2027-01-01T00:00", "a")
    _outages(store)
    tick(store, at("2027-02-03T00:00"))
    out = cli(
        "report",
        "subscriptions",
        "--group-by",
        "term",
        "--from",
        "2027-01-01T00:00:00Z",
        "--to",
        "2027-02-03T00:00:00Z",
        "--format",
        "json",
    )
    (row,) = json.loads(out)
    assert row["subscription"] == sub
    assert row["subscribed_node_hours"] == "2232.00"  # 3 x 744
    assert row["delivered_node_hours"] == "1933.75"  # less 298 and the 15 minutes of blips
    assert row["undelivered_node_hours"] == "298.00"
    assert row["sla_credit"] == "2980.00" and row["sla"] == "credited"
    # the API: the same rows
    response = client.get(
        "/v1/subscription-utilisation",
        params={"group_by": "term", "from": "2027-01-01T00:00:00Z", "to": "2027-02-03T00:00:00Z"},
        headers=bearer(tokens["auditor"]),
    )
    assert response.status_code == 200, response.text
    (item,) = response.json()["items"]
    assert item["sla_credit_minor"] == 298_000 and item["sla_credit_display"] == "2,980.00 USD"
    for key in ("subscribed_node_hours", "delivered_node_hours", "undelivered_node_hours"):
        assert item[key] == row[key]
    # mid-term the credit is pending: what it comes to so far
    (early,) = json.loads(
        cli("report", "subscriptions", "--group-by", "term", "--from", "2027-01-01T00:00:00Z",
            "--to", "2027-01-06T00:00:00Z", "--format", "json")
    )  # fmt: skip
    assert early["sla"] == "pending" and early["undelivered_node_hours"] == "10.00"
    assert early["sla_credit_minor"] == 10_000


#: an outage of one node: (first hour, hours long or None: removed for good)
outages = st.lists(
    st.tuples(st.integers(-24, 31 * 24 + 24), st.one_of(st.none(), st.integers(1, 200))),
    max_size=3,
)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(nodes=st.integers(1, 3), registered=st.integers(0, 4), down=st.lists(outages, max_size=4))
def test_credits_on_the_store_equal_undelivered_hours_at_the_price_and_rerun_adds_nothing(
    store: PostgresEventStore,
    nodes: int,
    registered: int,
    down: list[list[tuple[int, int | None]]],
) -> None:
    """On the real store, through purchase and the billing tick: random cordons (whole
    hours, so every outage outlasts the 15-minute grace) and removals of a group's nodes;
    the credit is the node-hours short x 10.00, booked once however often the tick runs."""
    if not query(store, "SELECT 1 FROM events WHERE type = 'SubscriptionPricesPublished'"):
        publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    example = query(store, "SELECT count(*) FROM events WHERE type = 'SubscriptionPurchased'")
    group = f"g-{example[0][0]}"
    sub = purchase(
        store,
        group=group,
        spec="ml.g2.8xlarge",
        nodes=nodes,
        term="month",
        workspace="ws-prop",
        principal="test",
        at=at("2027-01-01T00:00"),
        key=group,
    ).subscription.subscription_id
    start = at("2027-01-01T00:00")
    hour = timedelta(hours=1)
    facts: list[tuple[datetime, Envelope]] = []
    for n in range(registered):
        name = f"{group}-n{n}"
        facts.append((start - 2 * timedelta(days=1), register(name, "2026-12-30T00:00", group)))
        for first, length in down[n] if n < len(down) else []:
            t0 = start + first * hour
            if length is None:
                facts.append((t0, remove(name, t0.strftime("%Y-%m-%dT%H:%M"))))
                break  # removed for good
            t1 = t0 + length * hour
            facts.append((t0, cordon(name, t0.strftime("%Y-%m-%dT%H:%M"))))
            facts.append((t1, cordon(name, t1.strftime("%Y-%m-%dT%H:%M"), cordoned=False)))
    # the reference: replay the facts in time order hour by hour
    facts.sort(key=lambda f: f[0])
    state = {f"{group}-n{n}": "up" for n in range(registered)}
    by_hour: dict[int, list[Envelope]] = {}
    for t, envelope in facts:
        by_hour.setdefault((t - start) // hour, []).append(envelope)
    short_hours = 0
    for h in range(-48, 31 * 24):
        for envelope in by_hour.get(h, []):
            name = envelope.data["node"]
            if envelope.type == "NodeRemoved":
                state[name] = "removed"
            elif envelope.type == "NodeCordoned" and state[name] != "removed":
                state[name] = "cordoned" if envelope.data["cordoned"] else "up"
        if h >= 0:
            short_hours += max(0, nodes - sum(1 for s in state.values() if s == "up"))
    store.append([envelope for _, envelope in facts])
    tick(store, at("2027-02-03T00:00"))
    before = query(store, "SELECT count(*) FROM events")[0][0]
    tick(store, at("2027-02-03T00:00"))  # a re-run adds nothing
    assert query(store, "SELECT count(*) FROM events")[0][0] == before
    ((data,),) = query(
        store,
        "SELECT data FROM events WHERE type = 'SlaCreditIssued' AND data->>'subscription_id' = :s",
        s=sub,
    )
    assert data["amount_minor"] == short_hours * 1_000  # 10.00 a node-hour
    assert 0 <= data["amount_minor"] <= nodes * 744_000
    posted = query(
        store,
        "SELECT coalesce(sum(amount_minor), 0) FROM billing_postings "
        "WHERE account = 'revenue/sla-credits/ml.g2.8xlarge' AND transaction_id = :t",
        t=data.get("transaction_id") or "",
    )
    assert int(posted[0][0]) == data["amount_minor"]


def test_a_cancelled_term_is_credited_to_its_cancellation_and_never_beyond_what_it_kept(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    kept = _buy(store, 3, "2027-01-01T00:00", "kept")
    _outages(store)
    cancel(store, kept, principal="test", immediately=True, at=at("2027-01-25T00:00"))
    # bought for another workspace's group: cancelled within 5 days, refunded in full
    store.append(
        [
            register("m1", "2026-12-31T00:00", "gpu-g2b"),
            cordon("m1", "2027-01-01T01:00"),
            cordon("m1", "2027-01-01T05:00", cordoned=False),
        ]
    )
    refunded = purchase(
        store,
        group="gpu-g2b",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-other",
        principal="test",
        at=at("2027-01-01T00:00"),
        key="refunded",
    ).subscription.subscription_id
    done = cancel(store, refunded, principal="test", immediately=True, at=at("2027-01-03T00:00"))
    assert done.refund.no_reason
    tick(store, at("2027-02-03T00:00"))
    rows = query(
        store,
        "SELECT data->>'subscription_id', (data->>'amount_minor')::int, data->>'ends_at', "
        "data->>'period' FROM events WHERE type = 'SlaCreditIssued'",
    )
    credits = {r[0]: r[1:] for r in rows}
    # n1's 10 hours and n3's 5 days to the cancellation: 130 node-hours x 10.00, booked
    # a grace after the cancellation, in January
    assert credits[kept] == (130_000, "2027-01-25T00:00:00Z", "2027-01")
    # 4 node-hours short, but the term was refunded in full: nothing more to credit
    assert credits[refunded] == (0, "2027-01-03T00:00:00Z", "2027-01")


@pytest.mark.parametrize(
    ("sla", "message"),
    [
        ("15", "sla: a mapping {grace_minutes: N}"),
        ("{grace: 15}", "sla: a mapping {grace_minutes: N}"),
        ("{grace_minutes: -1}", "sla.grace_minutes: a whole number >= 0"),
        ("{grace_minutes: 20000}", "at most 10080"),
    ],
)
def test_a_bad_commitment_is_refused_with_its_field_named(sla: str, message: str) -> None:
    with pytest.raises(Invalid, match=re.escape(message)):
        parse_price_book(SLA_BOOK.replace("{grace_minutes: 15}", sla))


def test_show_lists_each_terms_sla_credit(
    store: PostgresEventStore, cli: CliCall, client: TestClient, tokens: dict[str, str]
) -> None:
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    sub = _buy(store, 3, "2027-01-01T00:00", "a")
    _outages(store)
    # mid-term: pending, what it comes to so far (n1's 10 hours)
    early = cli("subscriptions", "show", sub, "--at", "2027-01-06T00:00:00Z")
    (term,) = [line for line in early.splitlines() if line.lstrip().startswith("1 ")]
    assert "pending" in term and "10.00" in term and "100.00" in term
    tick(store, at("2027-02-03T00:00"))
    shown = cli("subscriptions", "show", sub, "--at", "2027-02-03T00:00:00Z")
    assert "undelivered_node_hours" in shown and "sla_credit" in shown
    (term,) = [line for line in shown.splitlines() if line.lstrip().startswith("1 ")]
    assert "credited" in term and "298.00" in term and "2,980.00" in term

    def terms(at_: str) -> list[dict[str, object]]:
        response = client.get(
            f"/v1/subscriptions/{sub}", params={"at": at_}, headers=bearer(tokens["auditor"])
        )
        assert response.status_code == 200, response.text
        items: list[dict[str, object]] = response.json()["terms"]
        return items

    (credited,) = terms("2027-02-03T00:00:00Z")
    assert credited["sla"] == "credited" and credited["undelivered_node_hours"] == "298.00"
    assert credited["sla_credit_minor"] == 298_000
    assert credited["sla_credit_display"] == "2,980.00 USD"
    # the same figures as the report's term rows
    (row,) = json.loads(
        cli("report", "subscriptions", "--group-by", "term", "--from", "2027-01-01T00:00:00Z",
            "--to", "2027-02-03T00:00:00Z", "--format", "json")
    )  # fmt: skip
    assert (row["sla"], row["undelivered_node_hours"], row["sla_credit_minor"]) == (
        credited["sla"],
        credited["undelivered_node_hours"],
        credited["sla_credit_minor"],
    )
    (pending,) = terms("2027-01-06T00:00:00Z")
    assert pending["sla"] == "pending" and pending["sla_credit_minor"] == 10_000
    # before its service began: pending at zero
    (ahead,) = terms("2026-12-31T00:00:00Z")
    assert (ahead["sla"], ahead["undelivered_node_hours"], ahead["sla_credit_minor"]) == (
        "pending",
        "0.00",
        0,
    )


def test_show_says_none_when_the_book_states_no_commitment(
    store: PostgresEventStore, cli: CliCall, client: TestClient, tokens: dict[str, str]
) -> None:
    plain = parse_price_book(SLA_BOOK.replace("    sla: {grace_minutes: 15}\n", ""))
    publish_price_book(store, plain, at=at("2026-10-01T00:00"))
    sub = _buy(store, 3, "2027-01-01T00:00", "a")
    _outages(store)
    tick(store, at("2027-02-03T00:00"))
    response = client.get(
        f"/v1/subscriptions/{sub}",
        params={"at": "2027-02-03T00:00:00Z"},
        headers=bearer(tokens["auditor"]),
    )
    assert response.status_code == 200, response.text
    (term,) = response.json()["terms"]
    assert term["sla"] == "none" and term["sla_credit_minor"] is None
    assert "sla_credit_display" not in term or term["sla_credit_display"] is None
    shown = cli("subscriptions", "show", sub, "--at", "2027-02-03T00:00:00Z")
    (line,) = [line for line in shown.splitlines() if line.lstrip().startswith("1 ")]
    assert "none" in line
