"""``dlc-ledger ledger balance``: the trial balance balances after every finance command,
and receivables are aged from the end of the period they were posted to."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

from dlc_ledger.services.billing import issue_credit_note, publish_price_book, tick, void_invoice
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, started
from tests.support.clis import CliCall


def _books(cli: CliCall, *args: str) -> dict[str, list[dict[str, object]]]:
    return json.loads(cli("ledger", "balance", "--format", "json", *args))  # type: ignore[no-any-return]


def test_the_books_balance_after_every_finance_command(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(hours=10))])
    store.append([started("b", at("2026-12-20T00:00"), workspace="ws-b")])
    (invoice,) = tick(store, at("2026-12-02T00:00")).invoices  # November: 24.00 USD
    checks = [_books(cli)]
    issue_credit_note(store, invoice, "4.00", "goodwill", principal="test")
    checks.append(_books(cli))
    void_invoice(store, invoice, "wrong", principal="test")
    tick(store, at("2026-12-31T00:00"))  # the re-issue, and ws-b's December accrued
    checks.append(_books(cli))
    for books in checks:
        (total,) = books["totals"]
        assert total["balanced"] is True and total["debit"] == total["credit"], books
    accounts = {row["account"]: row for row in checks[-1]["accounts"]}
    assert accounts["revenue/credit-notes"]["balance"] == "4"
    assert accounts["receivable/ws-a"]["balance"] == "20"  # 24.00 invoiced, 4.00 credited

    # aged at 2027-01-15: November's receivable ended 45 days ago, December's is 14 days old
    aged = {r["workspace"]: r for r in _books(cli, "--at", "2027-01-15T00:00:00Z")["receivables"]}
    assert aged["ws-a"]["31-60"] == "20" and aged["ws-a"]["total"] == "20"
    assert aged["ws-b"]["0-30"] == aged["ws-b"]["total"] != "0"
    # at the end of December, ws-b's usage is still open (not invoiced)
    december = {
        r["workspace"]: r for r in _books(cli, "--at", "2026-12-31T00:00:00Z")["receivables"]
    }
    assert december["ws-b"]["open"] == december["ws-b"]["total"]
    assert "(balanced)" in cli("ledger", "balance")


def test_the_ledgers_cost_of_a_closed_period_is_its_invoices_total(
    store: PostgresEventStore, cli: CliCall
) -> None:
    # three jobs whose lines each end in a fraction of a cent: the invoice rounds each line
    # once, and the ledger's cost shows that rounding (merged by workspace and month, a
    # visible "(rounding)" row on any other key)
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append(
        [
            started("a", start),
            ended("a", start + timedelta(seconds=37.5 * 3)),
            started("c", start, workspace="ws-a", mode="idle"),
            ended("c", start + timedelta(seconds=41)),
        ]
    )
    (invoice,) = tick(store, at("2026-12-02T00:00")).invoices
    by_month = json.loads(
        cli("report", "cost", "--group-by", "workspace,month", "--source", "ledger",
            "--format", "json")
    )  # fmt: skip
    (shown,) = json.loads(cli("invoices", "list", "--format", "json"))
    assert shown["invoice_id"] == invoice
    assert [(r["workspace"], r["month"], r["cost_minor"]) for r in by_month] == [
        ("ws-a", "2026-11", shown["total_minor"])
    ]
    by_mode = json.loads(
        cli("report", "cost", "--group-by", "billing_mode", "--source", "ledger",
            "--format", "json")
    )  # fmt: skip
    assert "(rounding)" in {r["billing_mode"] for r in by_mode}
    total = sum(Decimal(r["cost_minor_precise"]) for r in by_mode)
    assert total == shown["total_minor"]


def test_credit_notes_list_with_currency_scale_and_decimal(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(hours=10))])
    (invoice,) = tick(store, at("2026-12-02T00:00")).invoices
    issue_credit_note(store, invoice, "10.00", "outage", principal="test")
    (note,) = json.loads(cli("invoices", "credits", "list", "--format", "json"))
    assert (note["amount_minor"], note["currency"], note["scale"]) == (1000, "USD", 2)
    assert note["amount"] == "10.00"
    table = cli("invoices", "credits", "list")
    assert "10.00" in table and "1,000" not in table
    assert "no workspace 'ws-nope'" in cli(
        "invoices", "credits", "list", "--workspace", "ws-nope", ok=False
    )
    assert "no invoice 'nope'" in cli("invoices", "credits", "list", "--invoice", "nope", ok=False)


def test_the_books_through_the_api_for_bookkeepers_only(
    store: PostgresEventStore, cli: CliCall
) -> None:
    from fastapi.testclient import TestClient

    from dlc_ledger.api.app import create_app
    from dlc_ledger.services.access import create_token

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(hours=10))])
    tick(store, at("2026-12-02T00:00"))
    secrets = {
        role: create_token(store, [role], name=role, created_by="test").secret
        for role in ("finance", "auditor", "workspace:ws-a")
    }
    with TestClient(create_app(store), raise_server_exceptions=False) as client:

        def get(role: str, **params: str) -> object:
            auth = {"Authorization": f"Bearer {secrets[role]}"}
            return client.get("/v1/ledger/balance", headers=auth, params=params)

        response = get("finance")
        assert response.status_code == 200, response.text  # type: ignore[attr-defined]
        body = response.json()  # type: ignore[attr-defined]
        cli_books = _books(cli)
        assert body["accounts"] == cli_books["accounts"]
        assert body["totals"] == cli_books["totals"] and body["totals"][0]["balanced"]
        (ws_a,) = body["receivables"]
        # aged at the cluster clock (the last pod's end, 2026-11-05): November is still open
        assert (ws_a["workspace"], ws_a["open"], ws_a["total"]) == ("ws-a", "24", "24")
        assert get("auditor", at="2027-01-15T00:00:00Z").json()["receivables"][0]["d31_60"] == "24"  # type: ignore[attr-defined]
        assert get("workspace:ws-a").status_code == 403  # type: ignore[attr-defined]
