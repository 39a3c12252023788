"""Payments and receivables end to end, through the CLI and the API on PostgreSQL: a partial
payment, an overpayment kept as credit and applied to the next invoice, a retry that adds
nothing, the bad inputs refused, ageing by what is still open, ``InvoiceOverdue``
appended once, and an over-settled invoice's excess (a credit note on a paid invoice, a
paid invoice voided and re-issued smaller) returned to the credit balance by the tick and
applied to the next invoice (docs/finance.md, "Payments and receivables")."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from dlc_ledger.services.billing import publish_price_book, tick, void_invoice
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, started
from tests.support.clis import CliCall


def _show(cli: CliCall, invoice: str) -> dict[str, Any]:
    return json.loads(cli("invoices", "show", invoice, "--format", "json"))  # type: ignore[no-any-return]


def _books(cli: CliCall, *args: str) -> dict[str, Any]:
    return json.loads(cli("ledger", "balance", "--format", "json", *args))  # type: ignore[no-any-return]


def _pay(cli: CliCall, invoice: str, amount: str, when: str, ref: str, ok: bool = True) -> str:
    return cli(
        "payments", "record", "--invoice", invoice, "--amount", amount, "--at", when,
        "--reference", ref, ok=ok,
    )  # fmt: skip


def _two_months(store: PostgresEventStore) -> str:
    """ws-a's November invoice (24.00 USD), and usage of December still to invoice."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(hours=10))])
    december = at("2026-12-05T00:00")
    store.append([started("b", december), ended("b", december + timedelta(hours=5))])
    (invoice,) = tick(store, at("2026-12-02T00:00")).invoices
    return invoice


def test_partial_over_and_repeated_payments_and_the_credit_applied_next(
    store: PostgresEventStore, cli: CliCall
) -> None:
    november = _two_months(store)
    assert _show(cli, november)["payment_status"] == "open"
    revenue_before = {
        r["account"]: r["balance"]
        for r in _books(cli)["accounts"]
        if r["account"].startswith(("revenue/", "deferred/"))
    }

    out = _pay(cli, november, "10.00", "2026-12-05T00:00:00Z", "bank-1")
    assert "10.00 USD on invoice" in out and "recorded" in out
    shown = _show(cli, november)
    assert (shown["paid"], shown["open"], shown["payment_status"]) == ("10.00", "14.00", "open")
    # a retry of the same payment adds nothing
    positions = len(store.read_by_type(["PaymentRecorded"]))
    again = _pay(cli, november, "10.00", "2026-12-05T00:00:00Z", "bank-1")
    assert "already recorded, nothing added" in again
    assert len(store.read_by_type(["PaymentRecorded"])) == positions == 1
    # the same reference for another payment is refused
    assert "was used for payment" in _pay(
        cli, november, "11.00", "2026-12-05T00:00:00Z", "bank-1", ok=False
    )

    # 20.00 against the 14.00 still owed: 6.00 kept as the workspace's credit
    out = _pay(cli, november, "20.00", "2026-12-20T00:00:00Z", "bank-2")
    assert "14.00 USD applied, 6.00 USD kept as credit" in out
    shown = _show(cli, november)
    assert (shown["paid"], shown["open"], shown["payment_status"]) == ("24.00", "0.00", "paid")
    assert [p["reference"] for p in shown["payments"]] == ["bank-1", "bank-2"]
    accounts = {r["account"]: r["balance"] for r in _books(cli)["accounts"]}
    assert accounts["cash/USD"] == "30" and accounts["credit/ws-a"] == "-6"
    # payments never touch revenue
    assert {k: v for k, v in accounts.items() if k in revenue_before} == revenue_before

    # December's invoice (12.00): the credit is applied at its issue, naming both invoices
    ran = cli("billing", "run", "--until", "2027-01-02T00:00:00Z", "--force")
    assert "issued 1 invoices" in ran and "applied 1 credit balances to open invoices" in ran
    (december,) = [
        i["invoice_id"]
        for i in json.loads(cli("invoices", "list", "--format", "json"))
        if i["period"] == "2026-12"
    ]
    shown = _show(cli, december)
    assert (shown["total"], shown["applied"], shown["open"]) == ("12.00", "6.00", "6.00")
    (applied,) = shown["credit_applied"]
    assert (applied["from_invoice_id"], applied["amount"]) == (november, "6.00")
    table = cli("invoices", "show", december)
    assert "credit applied 6.00 USD from invoice " + november in table
    assert "open 6.00 USD" in table
    tick(store, at("2027-01-03T00:00"))  # a second tick applies nothing more
    assert len(store.read_by_type(["CreditApplied"])) == 1

    books = _books(cli)
    accounts = {r["account"]: r["balance"] for r in books["accounts"]}
    assert accounts["credit/ws-a"] == "0" and accounts["receivable/ws-a"] == "6"
    (total,) = books["totals"]
    assert total["balanced"] is True

    listed = json.loads(cli("payments", "list", "--format", "json"))
    assert [(p["reference"], p["applied"], p["excess"]) for p in listed] == [
        ("bank-1", "10.00", "0.00"),
        ("bank-2", "14.00", "6.00"),
    ]
    assert json.loads(cli("payments", "list", "--invoice", december, "--format", "json")) == []
    assert "no invoice 'nope'" in cli("payments", "list", "--invoice", "nope", ok=False)
    # a rebuild of the billing view, a page at a time, folds the same figures
    before = [_show(cli, november), _show(cli, december), listed]
    cli("projections", "rebuild", "billing", "--page-size", "3")
    after = [_show(cli, november), _show(cli, december)]
    assert [*after, json.loads(cli("payments", "list", "--format", "json"))] == before


def test_bad_payments_are_refused_with_a_message(store: PostgresEventStore, cli: CliCall) -> None:
    invoice = _two_months(store)
    when = "2026-12-05T00:00:00Z"
    assert "no invoice 'nope'" in _pay(cli, "nope", "1.00", when, "r1", ok=False)
    assert "must be positive" in _pay(cli, invoice, "0", when, "r2", ok=False)
    assert "must be positive" in _pay(cli, invoice, "-5.00", when, "r3", ok=False)
    assert "more decimals than USD allows" in _pay(cli, invoice, "1.005", when, "r4", ok=False)
    assert "not a plain decimal" in _pay(cli, invoice, "ten", when, "r5", ok=False)
    assert "not a plain decimal" in _pay(cli, invoice, "1e9", when, "r8", ok=False)
    assert "beyond the largest amount" in _pay(cli, invoice, "1" * 30, when, "r9", ok=False)
    assert "--at" in _pay(cli, invoice, "1.00", "yesterday", "r6", ok=False)
    void_invoice(store, invoice, "wrong", principal="test")
    assert "is voided" in _pay(cli, invoice, "1.00", when, "r7", ok=False)
    assert store.read_by_type(["PaymentRecorded"]) == []


def test_ageing_counts_what_is_still_open(store: PostgresEventStore, cli: CliCall) -> None:
    november = _two_months(store)
    tick(store, at("2027-01-02T00:00"))  # December's invoice, 12.00
    aged = {r["workspace"]: r for r in _books(cli, "--at", "2027-01-15T00:00:00Z")["receivables"]}
    # November (ended 45 days before) in 31-60, December (14 days) in 0-30
    assert (aged["ws-a"]["31-60"], aged["ws-a"]["0-30"], aged["ws-a"]["total"]) == (
        "24",
        "12",
        "36",
    )
    _pay(cli, november, "20.00", "2027-01-10T00:00:00Z", "part")
    aged = {r["workspace"]: r for r in _books(cli, "--at", "2027-01-15T00:00:00Z")["receivables"]}
    assert (aged["ws-a"]["31-60"], aged["ws-a"]["0-30"], aged["ws-a"]["total"]) == (
        "4",
        "12",
        "16",
    )
    # before the payment was received, ageing shows the invoice whole
    aged = {r["workspace"]: r for r in _books(cli, "--at", "2027-01-09T00:00:00Z")["receivables"]}
    assert aged["ws-a"]["31-60"] == "24"


def test_an_invoice_still_open_after_the_due_days_is_overdue_once(
    store: PostgresEventStore, cli: CliCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLC_INVOICE_DUE_DAYS", "10")
    november = _two_months(store)  # issued 2026-12-02: due 2026-12-12
    assert tick(store, at("2026-12-11T00:00")).overdue == ()
    _pay(cli, november, "4.00", "2026-12-10T00:00:00Z", "some")
    assert tick(store, at("2026-12-13T00:00")).overdue == (november,)
    assert tick(store, at("2026-12-14T00:00")).overdue == ()
    (fact,) = store.read_by_type(["InvoiceOverdue"])
    assert fact.data["open_minor"] == 2000 and fact.data["due_days"] == 10
    shown = _show(cli, november)
    assert shown["payment_status"] == "overdue" and shown["overdue_at"].startswith("2026-12-12")
    _pay(cli, november, "20.00", "2026-12-15T00:00:00Z", "rest")
    assert _show(cli, november)["payment_status"] == "paid"
    assert tick(store, at("2026-12-16T00:00")).overdue == ()
    assert len(store.read_by_type(["InvoiceOverdue"])) == 1


def test_a_paid_invoice_is_never_overdue(
    store: PostgresEventStore, cli: CliCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLC_INVOICE_DUE_DAYS", "0")
    november = _two_months(store)
    _pay(cli, november, "24.00", "2026-12-02T00:00:00Z", "all")
    assert tick(store, at("2026-12-03T00:00")).overdue == ()
    monkeypatch.setenv("DLC_INVOICE_DUE_DAYS", "soon")
    with pytest.raises(ValueError, match="DLC_INVOICE_DUE_DAYS"):
        tick(store, at("2026-12-04T00:00"))


def test_payments_through_the_api_for_finance_only(store: PostgresEventStore, cli: CliCall) -> None:
    from fastapi.testclient import TestClient

    from dlc_ledger.api.app import create_app
    from dlc_ledger.services.access import create_token

    invoice = _two_months(store)
    secrets = {
        role: create_token(store, [role], name=role.replace(":", "-"), created_by="test").secret
        for role in ("finance", "auditor", "workspace:ws-a")
    }

    def auth(role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secrets[role]}"}

    body = {"invoice_id": invoice, "amount": "30.00", "at": "2026-12-05T00:00:00Z",
            "reference": "wire-1"}  # fmt: skip
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        refused = client.post("/v1/payments", json=body, headers=auth("workspace:ws-a"))
        assert refused.status_code == 403
        assert client.post("/v1/payments", json=body, headers=auth("auditor")).status_code == 403
        for bad, status in (
            ({"amount": "0"}, 400),
            ({"amount": "-1"}, 400),
            ({"amount": "1.005"}, 400),
            ({"amount": "lots"}, 400),
            ({"invoice_id": "nope"}, 404),
            ({"at": "2026-12-05T00:00:00"}, 422),
        ):
            answer = client.post("/v1/payments", json={**body, **bad}, headers=auth("finance"))
            assert answer.status_code == status, (bad, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
        made = client.post("/v1/payments", json=body, headers=auth("finance"))
        assert made.status_code == 201, made.text
        paid = made.json()["payment"]
        assert (paid["applied_minor"], paid["excess_minor"], paid["amount_display"]) == (
            2400,
            600,
            "30.00 USD",
        )
        again = client.post("/v1/payments", json=body, headers=auth("finance"))
        assert again.status_code == 200 and again.json()["created"] is False
        other = client.post(
            "/v1/payments", json={**body, "amount": "31.00"}, headers=auth("finance")
        )
        assert other.status_code == 409
        listed = client.get("/v1/payments", headers=auth("auditor")).json()["items"]
        assert [p["payment_id"] for p in listed] == [paid["payment_id"]]
        assert client.get("/v1/payments", headers=auth("workspace:ws-a")).status_code == 403
        detail = client.get(f"/v1/invoices/{invoice}", headers=auth("workspace:ws-a")).json()
        assert (detail["payment_status"], detail["open_minor"], detail["paid_minor"]) == (
            "paid",
            0,
            2400,
        )
        assert [p["reference"] for p in detail["payments"]] == ["wire-1"]
        (row,) = client.get("/v1/invoices", headers=auth("finance")).json()["items"]
        assert (row["payment_status"], row["open_display"]) == ("paid", "0.00 USD")
    assert json.loads(cli("payments", "list", "--format", "json"))[0]["reference"] == "wire-1"


def test_two_payments_racing_for_one_invoice_settle_it_once(
    store: PostgresEventStore, cli: CliCall
) -> None:
    import threading

    from dlc_ledger.services.billing import record_payment

    invoice = _two_months(store)  # 24.00 owed
    barrier = threading.Barrier(2)
    results = []

    def pay(ref: str) -> None:
        barrier.wait()
        results.append(
            record_payment(store, invoice, "20.00", at("2026-12-05T00:00"), ref, principal="t")
        )

    threads = [threading.Thread(target=pay, args=(ref,)) for ref in ("race-1", "race-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted((r.payment.applied_minor, r.payment.excess_minor) for r in results) == [
        (400, 1600),
        (2000, 0),
    ]
    shown = _show(cli, invoice)
    assert (shown["paid"], shown["open"], shown["payment_status"]) == ("24.00", "0.00", "paid")


def _receivable(cli: CliCall, workspace: str = "ws-a") -> str:
    accounts = {r["account"]: r["balance"] for r in _books(cli)["accounts"]}
    return str(accounts.get(f"receivable/{workspace}", "0"))


def _credit(cli: CliCall, workspace: str = "ws-a") -> str:
    accounts = {r["account"]: r["balance"] for r in _books(cli)["accounts"]}
    return str(accounts.get(f"credit/{workspace}", "0"))


def _run(cli: CliCall, until: str) -> dict[str, Any]:
    return json.loads(cli("billing", "run", "--until", until, "--force", "--format", "json"))  # type: ignore[no-any-return]


def _api_shows_the_return(store: PostgresEventStore, invoice: str, settlement: str) -> None:
    from fastapi.testclient import TestClient

    from dlc_ledger.api.app import create_app
    from dlc_ledger.services.access import create_token

    secret = create_token(store, ["auditor"], name="auditor", created_by="test").secret
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        got = client.get(f"/v1/invoices/{invoice}", headers={"Authorization": f"Bearer {secret}"})
        assert got.status_code == 200, got.text
        body = got.json()
        assert (body["returned_minor"], body["open_minor"]) == (500, 0)
        assert [r["settlement_id"] for r in body["returned_to_credit"]] == [settlement]
        listed = client.get("/v1/invoices", headers={"Authorization": f"Bearer {secret}"})
        assert listed.status_code == 200, listed.text
        assert [i["returned_display"] for i in listed.json()["items"]] == ["5.00 USD"]


def test_a_credit_note_on_a_paid_invoice_moves_to_the_credit_balance_and_is_applied_next(
    store: PostgresEventStore, cli: CliCall
) -> None:
    november = _two_months(store)  # 24.00
    _pay(cli, november, "24.00", "2026-12-05T00:00:00Z", "bank-1")
    cli("invoices", "credit", november, "--amount", "5.00", "--reason", "goodwill")
    assert _receivable(cli) == "-5"  # the gap: settled beyond the total

    ran = _run(cli, "2026-12-03T00:00:00Z")
    (settlement,) = ran["returned_to_credit"]
    assert (_receivable(cli), _credit(cli)) == ("0", "-5")
    shown = _show(cli, november)
    assert (shown["returned"], shown["open"], shown["payment_status"]) == ("5.00", "0.00", "paid")
    ((returned,),) = [shown["returned_to_credit"]]
    assert (returned["settlement_id"], returned["amount"]) == (settlement, "5.00")
    assert "returned to credit 5.00 USD" in cli("invoices", "show", november)
    _api_shows_the_return(store, november, settlement)
    # a re-run adds nothing
    assert _run(cli, "2026-12-03T00:00:00Z")["returned_to_credit"] == []
    assert len(store.read_by_type(["InvoiceOverSettled"])) == 1
    # a further credit note returns only the difference
    cli("invoices", "credit", november, "--amount", "3.00", "--reason", "sla")
    (again,) = _run(cli, "2026-12-03T01:00:00Z")["returned_to_credit"]
    assert again != settlement
    events = store.read_by_type(["InvoiceOverSettled"])
    assert [e.envelope.data["returned_minor"] for e in events] == [500, 300]
    assert (_receivable(cli), _credit(cli)) == ("0", "-8")
    assert _show(cli, november)["returned"] == "8.00"

    # December's invoice (12.00) is settled with it at its issue, naming November
    ran = _run(cli, "2027-01-02T00:00:00Z")
    assert ran["returned_to_credit"] == [] and len(ran["credits_applied"]) == 2
    (december,) = ran["invoices"]
    shown = _show(cli, december)
    assert (shown["total"], shown["applied"], shown["open"]) == ("12.00", "8.00", "4.00")
    assert {a["from_invoice_id"] for a in shown["credit_applied"]} == {november}
    assert (_receivable(cli), _credit(cli)) == ("4", "0")
    (total,) = _books(cli)["totals"]
    assert total["balanced"] is True
    aged = {r["workspace"]: r for r in _books(cli, "--at", "2027-01-15T00:00:00Z")["receivables"]}
    assert aged["ws-a"]["total"] == "4"
    # a rebuild of the billing view folds the same figures
    before = [_show(cli, november), _show(cli, december)]
    cli("projections", "rebuild", "billing", "--page-size", "3")
    assert [_show(cli, november), _show(cli, december)] == before


def test_a_paid_invoice_voided_and_reissued_smaller_returns_the_excess(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    # an occupancy still open at the close: November is invoiced to its end (25 days)
    store.append([started("a", at("2026-11-05T00:00"))])
    (november,) = tick(store, at("2026-12-02T00:00")).invoices
    total = _show(cli, november)["total"]
    _pay(cli, november, total, "2026-12-02T12:00:00Z", "bank-1")
    assert _show(cli, november)["payment_status"] == "paid"
    cli("invoices", "void", november, "--reason", "the pod had ended on the 5th")
    # the end the watcher missed: ten hours, not 25 days; the re-issue bills 24.00
    store.append([ended("a", at("2026-11-05T10:00"))])
    for until in ("2026-12-03T00:00:00Z", "2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z"):
        _run(cli, until)
        assert not _receivable(cli).startswith("-")  # never negative after a tick
    (reissue,) = [
        i["invoice_id"]
        for i in json.loads(cli("invoices", "list", "--format", "json"))
        if i["status"] == "issued"
    ]
    shown = _show(cli, reissue)
    excess = Decimal(total) - Decimal("24.00")
    assert (shown["total"], shown["paid"], shown["open"]) == ("24.00", "0.00", "0.00")
    assert Decimal(shown["returned"]) == excess and shown["payment_status"] == "paid"
    (event,) = store.read_by_type(["InvoiceOverSettled"])  # re-runs added nothing
    assert event.envelope.data["invoice_id"] == reissue
    assert (_receivable(cli), Decimal(_credit(cli))) == ("0", -excess)
    # December's usage (12.00) is paid from it
    december = at("2026-12-05T00:00")
    store.append([started("b", december), ended("b", december + timedelta(hours=5))])
    ran = _run(cli, "2027-01-02T00:00:00Z")
    (dec_invoice,) = ran["invoices"]
    shown = _show(cli, dec_invoice)
    assert (shown["applied"], shown["open"], shown["payment_status"]) == ("12.00", "0.00", "paid")
    assert (_receivable(cli), Decimal(_credit(cli))) == ("0", -(excess - 12))
