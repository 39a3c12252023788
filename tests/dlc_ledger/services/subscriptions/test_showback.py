"""Showback of prepaid cost (issue 47 part 6): the recognised revenue of a group's
subscriptions attributed to workspaces by guarantee, beside pay-as-you-go in
``report cost --with-prepaid`` and ``/v1/cost?with_prepaid``, exact to the minor unit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dlc_ledger.api.app import create_app
from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import cancel, prepaid, purchase
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall

# 2 x ml.g2.8xlarge = 16 GPUs. root guarantees 12 of them: team-a 8, team-b 2 (two
# workspaces), 2 root keeps (no workspace bound to it); 4 nobody guarantees.
TREE = """
quotas:
  - name: root
    min: {gpu/any: 12000, cpu: 100000, memory: 200000}
    resource_groups: [gpu-g2]
  - name: team-a
    parent: root
    min: {gpu/any: 8000}
    workspaces: [ws-a]
  - name: team-b
    parent: root
    min: {gpu/any: 2000}
    workspaces: [ws-b, ws-c]
  - name: payg
    min: {gpu/any: 1000}
    workspaces: [ws-payg]
"""
JANUARY = ("--from", "2027-01-01T00:00:00Z", "--to", "2027-02-01T00:00:00Z")


def _setup(store: PostgresEventStore) -> str:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    order = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=2,
        term="year",
        workspace="ws-pay",
        principal="test",
        at=at("2027-01-01T00:00"),
    )
    apply_quota_file(store, TREE, principal="test", at=at("2027-01-01T00:00"))
    start = at("2027-01-03T00:00")
    store.append(
        [
            started("payg", start, workspace="ws-payg"),
            ended("payg", start + timedelta(hours=10)),
        ]
    )
    tick(store, at("2027-02-01T00:00"))
    return order.subscription.subscription_id


def _recognised(store: PostgresEventStore, period: str) -> int:
    """The revenue the ledger recognised for subscriptions in ``period`` (minor units)."""
    (total,) = query(
        store,
        "SELECT -sum(p.amount_minor) FROM billing_postings p JOIN billing_transactions t "
        "USING (transaction_id) WHERE p.account LIKE 'revenue/subscription/%' "
        "AND t.period = :p",
        p=period,
    )[0]
    return int(total)


def test_each_workspace_bears_its_guaranteed_share_exactly(store: PostgresEventStore) -> None:
    _setup(store)
    revenue = _recognised(store, "2027-01")
    assert revenue == round(19_600_000 * 31 / 365)  # 196,000.00 a year, 31 days of 365
    shares = prepaid(store, ("workspace", "quota"), at("2027-01-01T00:00"), at("2027-02-01T00:00"))
    assert sum(shares.values()) == revenue  # exactly, in minor units
    # exact shares: ws-a 8/16, ws-b and ws-c 1/16 each, root's own 2/16, nobody's 4/16
    expected = {
        ("ws-a", "team-a"): revenue * 8 / 16,
        ("ws-b", "team-b"): revenue / 16,
        ("ws-c", "team-b"): revenue / 16,
        ("(unattributed)", "root"): revenue * 2 / 16,
        ("(unattributed)", "(unattributed)"): revenue * 4 / 16,
    }
    got = {(ws, q): minor for (ws, q, cur), minor in shares.items()}
    assert set(got) == set(expected)
    for key, exact in expected.items():
        assert abs(got[key] - exact) < 1, key  # the largest remainder: within a unit
    assert {cur for *_, cur in shares} == {"USD"}


def test_report_cost_with_prepaid_shows_a_prepaid_workspace(
    store: PostgresEventStore, cli: CliCall
) -> None:
    _setup(store)
    plain = json.loads(cli("report", "cost", *JANUARY, "--format", "json"))
    assert "ws-a" not in {r["workspace"] for r in plain}  # no pay-as-you-go: not shown
    assert all("prepaid_minor" not in r for r in plain)  # the report as it was
    rows = json.loads(cli("report", "cost", *JANUARY, "--with-prepaid", "--format", "json"))
    by_ws = {r["workspace"]: r for r in rows}
    revenue = _recognised(store, "2027-01")
    assert sum(r["prepaid_minor"] for r in rows) == revenue
    a = by_ws["ws-a"]
    assert a["cost_minor"] == 0 and a["prepaid_minor"] == round(revenue / 2)
    assert a["prepaid"] == f"{a['prepaid_minor'] / 100:.2f}"
    # pay-as-you-go beside it, unchanged: 10 GPU-hours at 2.40
    assert (by_ws["ws-payg"]["cost_minor"], by_ws["ws-payg"]["prepaid_minor"]) == (2400, 0)
    # the payer's cost is the order (billed when ordered); it is bound to no quota
    assert (by_ws["ws-pay"]["cost_minor"], by_ws["ws-pay"]["prepaid_minor"]) == (19_600_000, 0)
    assert by_ws["(unattributed)"]["prepaid_minor"] == revenue - sum(
        by_ws[w]["prepaid_minor"] for w in ("ws-a", "ws-b", "ws-c")
    )
    for other in ("ws-payg", "ws-pay"):
        kept = {k: v for k, v in by_ws[other].items() if not k.startswith("prepaid")}
        assert kept == next(r for r in plain if r["workspace"] == other)
    table = cli("report", "cost", *JANUARY, "--with-prepaid")
    assert "prepaid" in table.splitlines()[0] and "ws-a" in table
    refused = cli("report", "cost", "--group-by", "flavor", "--with-prepaid", ok=False)
    assert "prepaid cost is attributed by workspace, quota, month only" in refused
    as_of = cli("report", "cost", *JANUARY, "--as-of", "2027-02-01", "--with-prepaid", ok=False)
    assert "drop --as-of" in as_of


def test_by_month_each_month_adds_up_to_its_recognised_revenue(
    store: PostgresEventStore, cli: CliCall
) -> None:
    sub = _setup(store)
    cancel(store, sub, principal="test", immediately=True, at=at("2027-02-10T12:00"))
    tick(store, at("2027-03-01T00:00"))
    rows = json.loads(
        cli(
            "report", "cost", "--group-by", "workspace,month", "--from", "2027-01-01T00:00:00Z",
            "--to", "2027-03-01T00:00:00Z", "--with-prepaid", "--format", "json",
        )
    )  # fmt: skip
    for month in ("2027-01", "2027-02"):
        mine = [r for r in rows if r["month"] == month]
        assert sum(r["prepaid_minor"] for r in mine) == _recognised(store, month), month
    feb = {r["workspace"]: r["prepaid_minor"] for r in rows if r["month"] == "2027-02"}
    # 41 days consumed in all (31 + 9 whole + 1 started): February bears the rest of it
    assert sum(feb.values()) == round(41 * 9_800_00 * 2 / 30) - _recognised(store, "2027-01")
    assert feb["ws-a"] > 0


@pytest.fixture
def client(store: PostgresEventStore) -> Iterator[TestClient]:
    with TestClient(create_app(store), raise_server_exceptions=False) as c:
        yield c


def _get(client: TestClient, token: str, url: str, **params: Any) -> Any:
    response = client.get(url, params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response.json()


def test_the_api_shows_prepaid_cost_scoped_to_the_token(
    store: PostgresEventStore, client: TestClient, tokens: dict[str, str]
) -> None:
    _setup(store)
    window = {"from": "2027-01-01T00:00:00Z", "to": "2027-02-01T00:00:00Z"}
    body = _get(client, tokens["finance"], "/v1/cost", with_prepaid="true", **window)
    by_ws = {r["workspace"]: r for r in body["items"]}
    revenue = _recognised(store, "2027-01")
    assert sum(r["prepaid_minor"] for r in body["items"]) == revenue
    assert by_ws["ws-a"]["prepaid_display"] == f"{by_ws['ws-a']['prepaid_minor'] / 100:,.2f} USD"
    plain = _get(client, tokens["finance"], "/v1/cost", **window)
    assert all("prepaid_minor" not in r for r in plain["items"])
    # a window with no pay-as-you-go at all: the prepaid workspaces still show
    quiet = {"from": "2027-02-01T00:00:00Z", "to": "2027-02-11T00:00:00Z"}
    assert _get(client, tokens["finance"], "/v1/cost", **quiet)["items"] == []
    rows = _get(client, tokens["finance"], "/v1/cost", with_prepaid="true", **quiet)["items"]
    ten_days = round(19_600_000 * 41 / 365) - round(19_600_000 * 31 / 365)
    assert sum(r["prepaid_minor"] for r in rows) == ten_days
    assert {r["workspace"]: r["cost_display"] for r in rows}["ws-a"] == "0.00 USD"
    scoped = _get(client, tokens["lead-b"], "/v1/cost", with_prepaid="true", **quiet)["items"]
    assert [r["workspace"] for r in scoped] == ["ws-b"]
    mtd = _get(
        client, tokens["finance"], "/v1/month-to-date", at="2027-01-31T12:00:00Z",
        with_prepaid="true",
    )  # fmt: skip
    rows = {r["workspace"]: r for r in mtd["items"]}
    # month to date: the 30 days ended by then, half of it ws-a's (within a minor unit:
    # the largest remainder gives the leftover units to the larger remainders)
    assert rows["ws-a"]["cost_minor"] == 0
    assert abs(rows["ws-a"]["prepaid_minor"] - round(19_600_000 * 30 / 365) / 2) < 1
    assert rows["ws-a"]["prepaid_display"] == f"{rows['ws-a']['prepaid_minor'] / 100:,.2f} USD"
    assert "(unattributed)" not in rows
    bad = client.get(
        "/v1/cost", params={"group_by": "user", "with_prepaid": "true"},
        headers=bearer(tokens["finance"]),
    )  # fmt: skip
    assert bad.status_code == 400 and "attributed by workspace" in bad.json()["detail"]
