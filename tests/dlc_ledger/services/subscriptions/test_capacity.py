"""Capacity follows subscriptions: a tree that names groups is checked against what was
bought, and the jobs of a quota that draws on groups run prepaid (billing mode quota)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import purchase, resource_groups, subscriptions
from ledger.errors import Invalid
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall

TREE = """
quotas:
  - name: root
    min: {gpu/any: 16000, cpu: 100000, memory: 200000}
    resource_groups: [gpu-g2]
  - name: team
    parent: root
    min: {gpu/any: 16000, cpu: 100000, memory: 200000}
    workspaces: [ws-sub]
  - name: payg
    min: {gpu/any: 1000}
    workspaces: [ws-payg]
"""


def _buy(store: PostgresEventStore, nodes: int) -> None:
    purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=nodes,
        term="year",
        workspace="ws-sub",
        principal="test",
        at=at("2027-01-01T00:00"),
        key=f"n{nodes}",
    )


def test_a_tree_beyond_subscribed_capacity_is_refused_unless_forced(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    when = at("2027-01-02T00:00")
    with pytest.raises(Invalid, match=r"'gpu-g2' .* has no subscribed capacity"):
        apply_quota_file(store, TREE, principal="test", at=when)
    _buy(store, 1)  # 8 GPUs: 16 are guaranteed
    with pytest.raises(Invalid, match=r"quota 'root' guarantees more .* gpu 16,000 > 8,000"):
        apply_quota_file(store, TREE, principal="test", at=when)
    forced = apply_quota_file(store, TREE, principal="test", at=when, force=True)
    assert forced.events and any("gpu 16,000 > 8,000" in p for p in forced.over_capacity)


def test_jobs_on_subscribed_capacity_are_prepaid(store: PostgresEventStore) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(store, 2)
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"))
    start = at("2027-01-03T00:00")
    store.append(
        [
            started("sub", start, workspace="ws-sub"),
            ended("sub", start + timedelta(hours=10)),
            started("payg", start, workspace="ws-payg"),
            ended("payg", start + timedelta(hours=10)),
        ]
    )
    tick(store, at("2027-02-03T00:00"))
    modes = dict(query(store, "SELECT occupancy_id, billing_mode FROM billing_occupancies"))
    assert modes == {"sub": "quota", "payg": "public"}
    lines = query(
        store,
        "SELECT i.workspace, l.resource, l.amount_minor FROM billing_invoice_lines l "
        "JOIN billing_invoices i USING (invoice_id) WHERE i.period = '2027-01' ORDER BY 1, 2",
    )
    # ws-sub pays its subscription (2 x 98,000.00), not its GPU-hours; ws-payg 10 GPU-hours
    assert ("ws-payg", "gpu/any", 2400) in [tuple(r) for r in lines]
    assert ("ws-sub", "subscription/ml.g2.8xlarge", 19_600_000) in [tuple(r) for r in lines]
    assert not [r for r in lines if r[0] == "ws-sub" and r[1] == "gpu/any" and r[2] != 0]
    (group,) = [g for g in resource_groups(store, at("2027-01-05T00:00")) if g.group == "gpu-g2"]
    assert group.subscribed_nodes == 2 and group.quotas == ("root", "team")


def test_utilisation_splits_subscribed_time_into_used_lent_and_idle(
    store: PostgresEventStore,
) -> None:
    from dlc_ledger.services.subscriptions import subscription_report

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(store, 2)  # 16 GPUs
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"))
    start = at("2027-01-03T00:00")
    store.append(
        [
            started("own", start, workspace="ws-sub"),
            ended("own", start + timedelta(hours=10)),
            started("borrow", start, workspace="ws-payg", mode="idle"),
            ended("borrow", start + timedelta(hours=5)),
        ]
    )
    tick(store, at("2027-01-05T00:00"))
    (row,) = subscription_report(store, "group", start, start + timedelta(days=1))
    assert row["subscribed_gpu_hours"] == "384.00"
    assert (row["used_gpu_hours"], row["lent_gpu_hours"], row["idle_gpu_hours"]) == (
        "10.00",
        "5.00",
        "369.00",
    )
    assert row["lent_paid_minor"] == 360  # 5 GPU-hours at 2.40 x 0.30
    assert row["cost_minor"] in (53_699, 53_700)  # 196,000.00 / 365 days, rounded per day
    (quota,) = subscription_report(store, "quota", start, start + timedelta(days=1))
    assert quota["quota"] == "team" and quota["used_gpu_hours"] == "10.00"
    assert quota["cost_by_use_minor"] == quota["cost_by_guarantee_minor"] == row["cost_minor"]


def test_a_quota_over_capacity_after_a_cancellation_is_flagged(
    store: PostgresEventStore, cli: CliCall
) -> None:
    from dlc_ledger.services.subscriptions import cancel

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(store, 2)
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-02T00:00"))
    (sub,) = [s.subscription_id for s in subscriptions(store)]
    rows = json.loads(cli("quotas", "list", "--format", "json", "--at", "2027-01-10"))
    assert {r["quota"]: (r["resource_groups"], r["capacity"]) for r in rows} == {
        "root": (["gpu-g2"], ""),
        "team": (["gpu-g2"], ""),
        "payg": ([], ""),
    }
    cancel(store, sub, principal="test", immediately=True, at=at("2027-01-20T00:00"))
    rows = json.loads(cli("quotas", "list", "--format", "json", "--at", "2027-01-21"))
    assert {r["quota"] for r in rows if r["capacity"] == "over"} == {"root"}
