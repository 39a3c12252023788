"""Period locks (issue 47, part 3): a posting dated into a closed month is booked into the
earliest open month as an adjustment naming its service dates, and reaches an invoice."""

from __future__ import annotations

import json
from typing import Any

from dlc_ledger.services.billing import publish_price_book
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, query
from tests.support.clis import CliCall


def _rows(cli: CliCall, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(cli(*args, "--format", "json"))
    return rows


def _buy(cli: CliCall, when: str, key: str) -> str:
    out = cli(
        "subscriptions", "purchase", "--group", "gpu-t4", "--spec", "ml.t4.2xlarge",
        "--nodes", "1", "--term", "month", "--workspace", "ws-a", "--at", when,
        "--key", key, "--allow-unknown-workspace",
    )  # fmt: skip
    return out


def test_a_back_dated_purchase_into_an_invoiced_month_is_invoiced(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """The audit's repro: October invoiced, then a purchase dated 2027-10-20; it must reach
    an invoice (November's, as an adjustment naming its October dates), and the ledger's
    cost of every closed month must equal its invoices."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(cli, "2027-10-05T00:00:00Z", "i1")
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2027-11-03T00:00:00Z", "--force"
    )
    october = cli("ledger", "export", "--period", "2027-10", "--format", "csv")
    _buy(cli, "2027-10-20T00:00:00Z", "i2")
    cli("billing", "run", "--until", "2027-11-05T00:00:00Z", "--force")
    # the closed month's journal (and so its trial balance movements) never changes
    assert cli("ledger", "export", "--period", "2027-10", "--format", "csv") == october
    # nothing receivable is left off an invoice once its month is closed
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2027-12-03T00:00:00Z", "--force"
    )
    uninvoiced = query(
        store,
        "SELECT t.transaction_id FROM billing_transactions t "
        "JOIN billing_postings p USING (transaction_id) "
        "WHERE p.account = 'receivable/ws-a' AND NOT EXISTS ("
        " SELECT 1 FROM billing_invoice_lines l JOIN billing_invoices i USING (invoice_id)"
        " WHERE i.status = 'issued' AND l.transaction_ids ? t.transaction_id)",
    )
    assert uninvoiced == []
    invoices = {r["period"]: r for r in _rows(cli, "invoices", "list")}
    assert invoices["2027-10"]["total_minor"] == 210_000
    # November: the second October term (an adjustment) + the renewal-free nothing else
    assert invoices["2027-11"]["total_minor"] == 210_000
    lines = json.loads(
        cli("invoices", "show", invoices["2027-11"]["invoice_id"], "--format", "json")
    )
    (line,) = lines["lines"]
    assert "locked period 2027-10" in line["description"]
    assert "2027-10-20 to 2027-11-20" in line["description"]
    cost = {
        r["month"]: r["cost_minor"]
        for r in _rows(
            cli,
            "report",
            "cost",
            "--group-by",
            "month",
            "--source",
            "ledger",
            "--from",
            "2027-10-01",
            "--to",
            "2027-12-01",
        )
    }
    assert cost == {"2027-10": 210_000, "2027-11": 210_000}


def test_billing_run_until_far_ahead_of_a_store_without_cluster_facts_is_refused(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """The audit's defect: no cluster fact, so nothing bounded --until; a run a year
    ahead renewed subscriptions and invoiced months that had not happened."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    cli(
        "subscriptions", "purchase", "--group", "gpu-t4", "--spec", "ml.t4.2xlarge",
        "--nodes", "1", "--term", "month", "--workspace", "ws-a", "--auto-renew",
        "--allow-unknown-workspace",
    )  # fmt: skip
    error = cli("billing", "run", "--until", "2099-01-01T00:00:00Z", ok=False)
    assert "--until 2099-01-01T00:00:00Z is in the future" in error and "--force" in error
    assert query(store, "SELECT count(*) FROM events WHERE type = 'SubscriptionRenewed'") == [(0,)]
    assert query(store, "SELECT count(*) FROM events WHERE type = 'InvoiceIssued'") == [(0,)]


def test_a_closed_month_is_locked_for_every_workspace(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """The tick that invoices October locks it for everyone (PeriodClosed): a workspace
    with no October invoice that buys into October afterwards is billed in November, as
    an adjustment; ``billing close --period`` closes November at its end, grace waived,
    and issues its invoices at once; ``billing periods`` lists them locked."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(cli, "2027-10-05T00:00:00Z", "i1")
    cli("billing", "run", "--until", "2027-11-03T00:00:00Z", "--force")
    periods = {r["period"]: r for r in _rows(cli, "billing", "periods")}
    assert periods["2027-10"]["status"] == "locked"
    assert periods["2027-10"]["closed_by"] == "scheduler"
    cli(
        "subscriptions", "purchase", "--group", "gpu-t4", "--spec", "ml.t4.2xlarge",
        "--nodes", "1", "--term", "month", "--workspace", "ws-b", "--at",
        "2027-10-25T00:00:00Z", "--key", "b1", "--allow-unknown-workspace",
    )  # fmt: skip
    (charge,) = query(
        store,
        "SELECT period, memo, data->>'service_period' AS service FROM billing_transactions "
        "WHERE workspace = 'ws-b'",
    )
    assert charge.period == "2027-11" and charge.service == "2027-10"
    assert "late adjustment for locked period 2027-10 (2027-10-25 to 2027-11-25)" in charge.memo
    # recognition of the October days of ws-b's term: booked into November too
    october_days = query(
        store,
        "SELECT count(*) FROM billing_transactions WHERE period = '2027-10' "
        "AND recorded_at > (SELECT max(recorded_at) FROM billing_invoices)",
    )
    assert october_days == [(0,)]
    # closing a month before it ends is refused
    error = cli("billing", "close", "--period", "2027-12", "--at", "2027-12-01T00:00:00Z",
                "--force", ok=False)  # fmt: skip
    assert "a period is closed once it has ended" in error
    assert "is not a period" in cli("billing", "close", "--period", "2027-13", ok=False)
    head = query(store, "SELECT max(position) FROM events")
    dry = cli("billing", "close", "--period", "2027-11", "--at", "2027-12-01T00:00:00Z",
              "--force", "--dry-run")  # fmt: skip
    assert dry.strip().startswith("period 2027-11 would close (dry run, nothing appended)")
    assert query(store, "SELECT max(position) FROM events") == head
    out = cli("billing", "close", "--period", "2027-11", "--at", "2027-12-01T00:00:00Z",
              "--force", "--reason", "month-end")  # fmt: skip
    assert out.strip() == "period 2027-11 closed; issued 1 invoices"  # ws-b's
    again = cli("billing", "close", "--period", "2027-11", "--at", "2027-12-01T00:00:00Z",
                "--force")  # fmt: skip
    assert again.strip() == "period 2027-11 already closed; issued 0 invoices"
    periods = {r["period"]: r for r in _rows(cli, "billing", "periods")}
    assert periods["2027-11"]["status"] == "locked"
    assert periods["2027-11"]["reason"] == "month-end"
    table = cli("billing", "periods")
    assert "2027-11" in table and "locked" in table and "month-end" in table
    assert "2027-11,locked" in cli("billing", "periods", "--format", "csv")
    invoices = {(r["workspace"], r["period"]): r for r in _rows(cli, "invoices", "list")}
    assert invoices[("ws-b", "2027-11")]["total_minor"] == 210_000
    assert ("ws-b", "2027-10") not in invoices


def test_the_ledger_cost_of_a_closed_month_is_its_invoices_with_late_usage(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """Late usage of an invoiced November is invoiced in December: the ledger's cost by
    month follows the invoices (on every key), the rated source the usage month."""
    from tests.support.billing import ended, started

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    cli("billing", "run", "--until", "2026-12-02T00:00:00Z", "--force")
    store.append([started("late", at("2026-11-20T00:00")), ended("late", at("2026-11-20T05:00"))])
    cli("billing", "run", "--until", "2027-01-02T00:00:00Z", "--force")
    invoices = {r["period"]: r["total_minor"] for r in _rows(cli, "invoices", "list")}
    assert invoices == {"2026-11": 2400, "2026-12": 1200}
    window = ("--from", "2026-11-01", "--to", "2027-01-01")
    for keys in ("month", "workspace,month", "month,flavor", "month,job", "month,kind"):
        rows = _rows(cli, "report", "cost", "--group-by", keys, "--source", "ledger", *window)
        by_month: dict[str, int] = {}
        for r in rows:
            by_month[r["month"]] = by_month.get(r["month"], 0) + r["cost_minor"]
        assert by_month == invoices, keys
    as_of = _rows(cli, "report", "cost", "--group-by", "month", "--as-of", "2099-01-01", *window)
    assert {r["month"]: r["cost_minor"] for r in as_of} == invoices
    rated = _rows(cli, "report", "cost", "--group-by", "month", "--source", "rated", *window)
    # (a month whose invoice holds no usage of its own shows as 0.00: the invoiced months)
    assert {r["month"]: r["cost_minor"] for r in rated if r["cost_minor"]} == {"2026-11": 3600}


def test_the_renewals_of_a_back_dated_auto_renew_purchase_are_invoiced(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """Bought on 4 November, dated 10 September with auto-renew, after September and
    October were invoiced: its first term and the renewal ordered on 7 October are booked
    into November as adjustments; November's invoice holds them and November's own renewal."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _buy(cli, "2027-09-05T00:00:00Z", "i1")
    cli("billing", "run", "--until", "2027-11-03T00:00:00Z", "--force")
    cli(
        "subscriptions", "purchase", "--group", "gpu-t4", "--spec", "ml.t4.2xlarge",
        "--nodes", "1", "--term", "month", "--workspace", "ws-a", "--auto-renew",
        "--at", "2027-09-10T00:00:00Z", "--key", "late", "--allow-unknown-workspace",
    )  # fmt: skip
    cli("billing", "run", "--until", "2027-12-03T00:00:00Z", "--force")
    invoices = {r["period"]: r for r in _rows(cli, "invoices", "list")}
    assert sorted(invoices) == ["2027-09", "2027-11"]
    assert invoices["2027-09"]["total_minor"] == 210_000
    assert invoices["2027-11"]["total_minor"] == 3 * 210_000
    shown = json.loads(cli("invoices", "show", invoices["2027-11"]["invoice_id"],
                           "--format", "json"))  # fmt: skip
    described = sorted(line["description"] for line in shown["lines"])
    assert [d.split(":")[0] for d in described] == [
        "adjustment for locked period 2027-09",
        "adjustment for locked period 2027-10",
        "renewal sub-" + described[2].split("sub-")[1].split(" ")[0] + " term 3",
    ]
    assert "2027-09-10 to 2027-10-10" in described[0]
    assert "2027-10-10 to 2027-11-10" in described[1]
