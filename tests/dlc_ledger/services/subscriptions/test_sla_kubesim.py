"""SLA credits on a replay: the node facts come from the real path, not from hand-made
envelopes. kubesim serves three Nodes of a subscribed resource group to the real watcher
(official ``kubernetes`` client, list + watch), which writes into the real store; through
kubesim's API one node is cordoned for ten hours, one removed, one blips for less than the
grace. The billing tick past the term's end credits the undelivered node-hours at the
term's node-hour price, computed here by hand from the instants the watcher recorded (not
through ``ledger/subscriptions/sla.py``), once, on the invoice, naming the nodes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kubernetes import client as kube

from consumers.watchers.listwatch import NODES
from consumers.watchers.runner import Watcher
from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.subscriptions import purchase
from kubesim import KubeSim
from kubesim.objects import node_object
from kubesim.resources import NODES as SIM_NODES
from ledger.store.postgres import PostgresEventStore
from tests.dlc_ledger.services.subscriptions.test_sla import sla_book
from tests.support.api import bearer
from tests.support.billing import at, query
from tests.support.watchers import settle, start_watcher

EPOCH = at("2026-12-31T00:00")
TERM_START, TERM_END = at("2027-01-01T00:00"), at("2027-02-01T00:00")
GROUP = "gpu-g2"
HOUR = Decimal(3600)


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    # the virtual clock starts the day before the term; bookmarks and watch timeouts as the
    # watcher tests set them (tests/support/kube.py), so nothing sleeps
    with KubeSim(epoch=EPOCH, bookmark_interval=0.05, timeout_scale=0.1) as sim:
        yield sim


def _advance_to(sim: KubeSim, instant: datetime) -> None:
    sim.advance((instant - sim.clock.now()).total_seconds())
    assert sim.clock.now() == instant


def _stored(store: PostgresEventStore, type_: str) -> list[tuple[str, datetime]]:
    rows = query(
        store,
        "SELECT data->>'node', occurred_at FROM events WHERE type = :t ORDER BY position",
        t=type_,
    )
    return [(str(node), occurred) for node, occurred in rows]


def test_credits_from_watched_cordons_and_removals_equal_undelivered_hours_at_the_price(
    cluster: KubeSim, store: PostgresEventStore, client: TestClient, tokens: dict[str, str]
) -> None:
    sim = cluster
    publish_price_book(store, sla_book(), at=at("2026-10-01T00:00"))
    for name in ("n1", "n2", "n3"):
        sim.cluster.create(
            SIM_NODES,
            node_object(
                name,
                gpus=8,
                cpu_milli=96_000,
                memory_mib=393_216,
                gpu_model="G2",
                labels={"dlc.ledger/resource-group": GROUP},
            ),
        )
    watcher: Watcher = start_watcher(sim, store.append, store=store, resources=(NODES,))
    api: Any = kube.ApiClient(kube.Configuration(host=sim.url))  # the client is untyped
    v1 = kube.CoreV1Api(api)

    def cordon(name: str, on: bool) -> None:
        # as `kubectl cordon` / `uncordon` do: a patch of spec.unschedulable; the watcher
        # takes the instant from its clock (kubesim's virtual one), so settle before time moves
        v1.patch_node(name, {"spec": {"unschedulable": on}})
        settle(watcher, sim)

    try:
        settle(watcher, sim)
        sub = purchase(
            store,
            group=GROUP,
            spec="ml.g2.8xlarge",
            nodes=3,
            term="month",
            workspace="ws-ls",
            principal="test",
            at=TERM_START,
            key="replay",
        ).subscription.subscription_id
        _advance_to(sim, at("2027-01-05T00:00"))
        cordon("n1", True)
        _advance_to(sim, at("2027-01-05T10:00"))
        cordon("n1", False)
        _advance_to(sim, at("2027-01-10T00:00"))
        cordon("n2", True)  # a 10-minute blip, under the 15-minute grace
        _advance_to(sim, at("2027-01-10T00:10"))
        cordon("n2", False)
        _advance_to(sim, at("2027-01-20T00:00"))
        v1.delete_node("n3")
        settle(watcher, sim)
    finally:
        watcher.stop()
        api.close()

    # what the watcher stored, at the cluster's instants
    registered = _stored(store, "NodeRegistered")
    cordons = _stored(store, "NodeCordoned")
    removed = _stored(store, "NodeRemoved")
    sources = query(store, "SELECT DISTINCT source FROM events WHERE type LIKE 'Node%%'")
    assert [s for (s,) in sources] == ["kube-watcher/test"]  # the watcher's, cluster `test`
    assert registered == [(n, EPOCH) for n in ("n1", "n2", "n3")]
    assert cordons == [
        ("n1", at("2027-01-05T00:00")),
        ("n1", at("2027-01-05T10:00")),
        ("n2", at("2027-01-10T00:00")),
        ("n2", at("2027-01-10T00:10")),
    ]
    assert removed == [("n3", at("2027-01-20T00:00"))]

    # by hand: the intervals each node was not delivered, from the stored instants
    (_, n1_down), (_, n1_up), (_, n2_down), (_, n2_up) = cordons
    grace = timedelta(minutes=15)
    assert n2_up - n2_down < grace  # the blip is not counted
    outages = [n1_up - n1_down, TERM_END - removed[0][1]]
    assert all(o >= grace for o in outages)
    undelivered_hours = sum((Decimal(o.total_seconds()) for o in outages), Decimal(0)) / HOUR
    # the term's node-hour price: 7,440.00 a node for a 744-hour January
    term_hours = Decimal((TERM_END - TERM_START).total_seconds()) / HOUR
    node_hour_minor = Decimal(744_000) / term_hours
    expected = int((undelivered_hours * node_hour_minor).to_integral_value())
    assert undelivered_hours == 298 and expected == 298_000  # 10 + 12 x 24 hours

    tick(store, at("2027-03-05T00:00"))  # past the term, and February's close
    ((data,),) = query(store, "SELECT data FROM events WHERE type = 'SlaCreditIssued'")
    assert data["subscription_id"] == sub
    assert data["amount_minor"] == expected
    assert Decimal(data["undelivered_node_seconds"]) == undelivered_hours * HOUR
    assert {d["node"] for d in data["down_nodes"]} == {"n1", "n3"}

    # a re-run adds nothing
    count = query(store, "SELECT count(*) FROM events")[0][0]
    tick(store, at("2027-03-05T00:00"))
    tick(store, at("2027-03-06T00:00"))
    assert query(store, "SELECT count(*) FROM events WHERE type = 'SlaCreditIssued'")[0][0] == 1
    assert query(store, "SELECT count(*) FROM events")[0][0] == count

    # the invoice's credit line names the subscription and the nodes
    (line,) = query(
        store,
        "SELECT l.description, l.amount_minor, l.quantity, l.unit FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE l.description LIKE 'SLA credit%%'",
    )
    description, amount, quantity, unit = line
    assert amount == -expected and Decimal(quantity) == -undelivered_hours
    assert unit == "node-hour"
    assert sub in description and "n1" in description and "n3" in description
    assert "n2" not in description

    # `subscriptions show` (the API's): the term credited, the same hours and amount
    response = client.get(
        f"/v1/subscriptions/{sub}",
        params={"at": "2027-03-06T00:00:00Z"},
        headers=bearer(tokens["auditor"]),
    )
    assert response.status_code == 200, response.text
    (term,) = response.json()["terms"]
    assert term["sla"] == "credited" and term["sla_credit_minor"] == expected
    assert Decimal(term["undelivered_node_hours"]) == undelivered_hours
