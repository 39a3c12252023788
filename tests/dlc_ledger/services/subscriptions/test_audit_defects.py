"""Defects of issue 47's audit in the subscription commands, each pinned by a test that
failed before its fix: a keyed retry without ``--at``, monthly terms bought on the 31st,
cancelling a purchase before its start, and quotas listed before they take effect."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import purchase, resource_groups
from ledger.errors import Conflict
from ledger.store.postgres import PostgresEventStore
from projections.subscriptions import load_subscriptions
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall

ORDER = (
    "subscriptions",
    "purchase",
    "--group",
    "gpu-t4",
    "--spec",
    "ml.t4.2xlarge",
    "--nodes",
    "2",
    "--term",
    "month",
    "--workspace",
    "ws-g",
    "--allow-unknown-workspace",
    "--key",
    "K",
)


def _balances(store: PostgresEventStore) -> dict[str, int]:
    rows = query(store, "SELECT account, sum(amount_minor) FROM billing_postings GROUP BY 1")
    return {str(a): int(b) for a, b in rows if int(b) != 0}


def test_a_keyed_retry_without_at_answers_the_original(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """The defaulted start (now) is not what the caller gave: a retry is not refused."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    first = cli(*ORDER)
    again = cli(*ORDER)
    assert first.startswith("bought sub-") and again.startswith("already bought sub-")
    assert first.split()[1] == again.split()[2]
    (sub,) = load_subscriptions(store).values()
    assert len(sub.terms) == 1
    assert (
        len(query(store, "SELECT 1 FROM billing_postings WHERE account LIKE 'receivable/%'")) == 1
    )
    # still refused: the same key for another purchase (what the caller gave differs)
    refused = cli(*ORDER[:7], "3", *ORDER[8:], ok=False)
    assert "idempotency key 'K' was used for purchase" in refused


def test_a_keyed_retry_with_the_same_explicit_start_adds_nothing(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    kw: dict[str, object] = {
        "group": "gpu-g2",
        "spec": "ml.g2.8xlarge",
        "nodes": 1,
        "term": "month",
        "workspace": "ws-a",
        "principal": "test",
        "key": "k1",
    }
    one = purchase(store, at=at("2027-01-10T00:00"), **kw)  # type: ignore[arg-type]
    books = _balances(store)
    two = purchase(store, at=at("2027-01-10T00:00"), **kw)  # type: ignore[arg-type]
    three = purchase(store, **kw)  # type: ignore[arg-type]  # no --at: the original
    assert one.created and not two.created and not three.created
    assert one.subscription == two.subscription == three.subscription
    assert _balances(store) == books
    with pytest.raises(Conflict, match="idempotency key 'k1' was used"):
        purchase(store, at=at("2027-01-11T00:00"), **kw)  # type: ignore[arg-type]


def test_a_month_bought_on_the_31st_keeps_its_day_after_february(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-a",
        principal="test",
        auto_renew=True,
        at=at("2027-01-31T09:00"),
    )
    tick(store, at("2027-05-01T00:00"))  # the scheduler renews February, March, April
    (sub,) = load_subscriptions(store).values()
    assert [(t.starts_at.isoformat(), t.ends_at.isoformat()) for t in sub.terms] == [
        ("2027-01-31T09:00:00+00:00", "2027-02-28T09:00:00+00:00"),
        ("2027-02-28T09:00:00+00:00", "2027-03-31T09:00:00+00:00"),
        ("2027-03-31T09:00:00+00:00", "2027-04-30T09:00:00+00:00"),
        ("2027-04-30T09:00:00+00:00", "2027-05-31T09:00:00+00:00"),
    ]


def test_a_purchase_not_yet_started_can_be_cancelled_in_full(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    order = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=2,
        term="month",
        workspace="ws-a",
        principal="test",
        at=at("2027-03-01T00:00"),
    )
    sub_id = order.subscription.subscription_id
    out = cli("subscriptions", "cancel", sub_id, "--at", "2027-02-10T00:00:00Z")
    # booked where its order is (its start), everything paid comes back, no capacity ever
    assert "capacity ends 2027-03-01T00:00:00Z" in out, out
    assert "refund 19,600.00 USD" in out.replace("19600.00", "19,600.00"), out
    (sub,) = load_subscriptions(store).values()
    assert sub.cancelled is not None and sub.cancelled.refund_minor == 1_960_000
    assert not sub.cancelled.no_reason  # the once-a-year refund is not spent on it
    for t in ("2027-02-20T00:00", "2027-03-01T00:00", "2027-03-15T00:00"):
        assert not sub.schedulable_at(at(t))
        (g,) = [g for g in resource_groups(store, at(t)) if g.group == "gpu-g2"]
        assert g.subscribed_nodes == 0 and g.capacity == {}
    tick(store, at("2027-04-03T00:00"))
    assert _balances(store) == {}  # charged and refunded: nothing owed, deferred or earned
    lines = query(
        store,
        "SELECT i.period, l.amount_minor FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.workspace = 'ws-a' ORDER BY 2",
    )
    assert [tuple(r) for r in lines] == [("2027-03", -1_960_000), ("2027-03", 1_960_000)]
    again = cli("subscriptions", "cancel", sub_id, "--at", "2027-02-11T00:00:00Z", ok=False)
    assert "already cancelled" in again


TREE = """
quotas:
  - name: root
    min: {gpu/any: 8000, cpu: 10000, memory: 20000}
    resource_groups: [gpu-g2]
    workspaces: [ws-a]
"""

LATER = """
quotas:
  - name: root
    min: {gpu/any: 8000, cpu: 10000, memory: 20000}
    resource_groups: [gpu-g2]
    workspaces: [ws-a]
  - name: late
    min: {gpu/any: 1000}
    resource_groups: [gpu-g2]
    workspaces: [ws-b]
"""


def test_resource_groups_at_t_lists_only_quotas_in_force_then(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=2,
        term="year",
        workspace="ws-a",
        principal="test",
        at=at("2027-01-01T00:00"),
    )
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"))
    apply_quota_file(store, LATER, principal="test", at=at("2027-02-01T00:00"))

    def quotas(when: str) -> str:
        rows = json.loads(cli("resource-groups", "list", "--format", "json", "--at", when))
        (g,) = [g for g in rows if g["group"] == "gpu-g2"]
        return str(g["quotas"])

    assert quotas("2027-01-01T12:00:00Z") == ""  # no tree yet
    assert quotas("2027-01-15T00:00:00Z") == "root"
    assert quotas("2027-02-01T00:00:00Z") == "late, root"
    show = cli("resource-groups", "show", "gpu-g2", "--at", "2027-01-20T00:00:00Z")
    assert "quotas: root" in show and "late" not in show
    _ = timedelta


def test_a_keyed_retry_over_the_api_without_at_answers_the_original(
    store: PostgresEventStore, tokens: dict[str, str]
) -> None:
    from fastapi.testclient import TestClient

    from dlc_ledger.api.app import create_app
    from tests.support.api import bearer

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    body = {
        "group": "gpu-g2",
        "spec": "ml.g2.8xlarge",
        "nodes": 1,
        "term": "month",
        "workspace": "ws-a",
        "key": "retry-1",
        "allow_unknown_workspace": True,
    }
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        first = client.post("/v1/subscriptions", json=body, headers=bearer(tokens["finance"]))
        assert first.status_code == 201, first.text
        head = store.head_position()
        again = client.post("/v1/subscriptions", json=body, headers=bearer(tokens["finance"]))
        assert again.status_code == 200, again.text
        assert again.json()["created"] is False
        sub_id = first.json()["subscription"]["subscription_id"]
        assert again.json()["subscription"]["subscription_id"] == sub_id
        assert store.head_position() == head
