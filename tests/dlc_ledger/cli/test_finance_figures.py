"""The finance commands' figures as an accountant reads them (issue 47's audit): amounts in
plain decimals at the currency's scale, ``billing run`` saying what it booked, and every
billed workspace-month in the cost report, even one that nets to zero."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

from dlc_ledger.services.billing import publish_price_book, tick
from dlc_ledger.services.subscriptions import cancel, purchase
from dlc_ledger.services.yaml_files import parse_price_book
from ledger.envelopes import Envelope, make_envelope
from ledger.events import NodeRegistered, NodeRemoved
from ledger.ids import fact_event_id
from ledger.store.postgres import PostgresEventStore
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall

_SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


def _subscription(
    store: PostgresEventStore, *, key: str = "k", when: str = "2027-01-10T00:00"
) -> str:
    return purchase(
        store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=1, term="month",
        workspace="ws-ls", principal="test", at=at(when), key=key,
    ).subscription.subscription_id  # fmt: skip


def test_precise_costs_are_plain_decimals_never_scientific(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _subscription(store)  # 9,800.00: "9.8E+3" once normalized
    tick(store, at("2027-02-12T00:00"))
    args = ("report", "cost", "--group-by", "workspace,month", "--source", "ledger",
            "--from", "2027-01-01", "--to", "2027-02-01")  # fmt: skip
    (row,) = json.loads(cli(*args, "--format", "json"))
    assert (row["cost_precise"], row["cost_minor_precise"]) == ("9800", "980000")
    (line,) = csv.DictReader(io.StringIO(cli(*args, "--format", "csv")))
    assert line["cost_precise"] == "9800" and not _SCIENTIFIC.search(str(line))


def test_billing_run_counts_what_it_booked_by_kind(store: PostgresEventStore, cli: CliCall) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _subscription(store)
    renewing = purchase(
        store, group="gpu-g2", spec="ml.g2.8xlarge", nodes=1, term="month", workspace="ws-ls",
        principal="test", at=at("2027-01-10T00:00"), key="r", auto_renew=True,
    ).subscription.subscription_id  # fmt: skip
    out = cli("billing", "run", "--until", "2027-02-12T00:00:00Z", "--force")
    # 31 days recognised on the one that expires on 2027-02-10, 33 on the renewed one
    assert "renewed 1" in out and "expired 1" in out and "recognised 64 days" in out, out
    assert "issued 1 invoices" in out
    assert "posted 0 rating transactions" in out  # no usage: and it says so, among the rest
    store.append([started("a", at("2027-02-12T00:00")), ended("a", at("2027-02-12T05:00"))])
    done = json.loads(
        cli("billing", "run", "--until", "2027-02-13T00:00:00Z", "--force", "--format", "json")
    )
    assert done["rating_transactions"] > 0 and done["finals"] == 1
    assert (done["renewed"], done["expired"], done["recognised_days"]) == (0, 0, 1)
    assert done["until"] == "2027-02-13T00:00:00Z" and done["invoices"] == []
    assert renewing


def test_a_credit_note_prints_its_amount_in_the_currency(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    _subscription(store)
    tick(store, at("2027-02-03T00:00"))
    ((invoice,),) = query(store, "SELECT invoice_id FROM billing_invoices")
    out = cli("invoices", "credit", invoice, "--amount", "1000", "--reason", "goodwill")
    assert "1,000.00 USD" in out and "(minor)" not in out and "100000" not in out


def test_the_balance_table_shows_amounts_at_the_currencys_scale(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append([started("a", start), ended("a", start + timedelta(seconds=37.5 * 3 + 0.001))])
    tick(store, at("2026-11-20T00:00"))  # posted below the cent, not invoiced yet
    books = json.loads(cli("ledger", "balance", "--format", "json"))
    precise = {row["account"]: row["balance"] for row in books["accounts"]}
    assert len(precise["receivable/ws-a"].split(".")[1]) > 2  # JSON keeps full precision
    table = cli("ledger", "balance")
    rows = [ln for ln in table.splitlines() if ln.startswith(("receivable/", "revenue/", "ws-a"))]
    amounts = re.findall(r"-?[\d,]+\.\d+", "\n".join(rows))
    assert amounts and all(len(a.split(".")[1]) == 2 for a in amounts), table
    assert precise["receivable/ws-a"] not in table


def test_a_workspace_month_that_nets_to_zero_is_in_the_cost_report(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    sub = _subscription(store)
    # the first no-reason refund within five days: all of it back, the month nets to 0.00
    cancel(store, sub, principal="test", immediately=True, at=at("2027-01-11T00:00"))
    store.append([started("a", at("2027-01-05T00:00")), ended("a", at("2027-01-05T01:00"))])
    tick(store, at("2027-02-03T00:00"))
    totals = dict(query(store, "SELECT workspace, total_minor FROM billing_invoices"))
    assert totals["ws-ls"] == 0 and totals["ws-a"] > 0
    for source in ("ledger", "rated"):
        rows = json.loads(
            cli("report", "cost", "--group-by", "workspace,month", "--source", source,
                "--from", "2027-01-01", "--to", "2027-02-01", "--format", "json")
        )  # fmt: skip
        shown = {(r["workspace"], r["month"]): r["cost"] for r in rows}
        assert shown.get(("ws-ls", "2027-01")) == "0.00", (source, rows)
        assert ("ws-a", "2027-01") in shown
        by_workspace = json.loads(
            cli("report", "cost", "--group-by", "workspace", "--source", source,
                "--from", "2027-01-01", "--to", "2027-02-01", "--format", "json")
        )  # fmt: skip
        assert {r["workspace"] for r in by_workspace} == {"ws-a", "ws-ls"}, source


_SLA_BOOK = """
id: sla-2027
currency: USD
scale: 2
effective_from: "2026-10-01T00:00:00Z"
rates:
  public: {gpu/any: "2.40", cpu: "0.048", memory: "0.006"}
idle_multiplier: "0.30"
subscriptions:
  ml.g2.8xlarge: {flavor: gpu/G2, gpus: 8, cpu: 96, memory_gib: 384, monthly: "7440.00",
                  yearly: "74400.00", sla: {grace_minutes: 15}}
"""


def _node(data: NodeRegistered | NodeRemoved, when: str) -> Envelope:
    return make_envelope(
        data,
        event_id=fact_event_id("test", "Node", data.node, f"{data.type_name}@{when}"),
        stream=f"node/{data.node}",
        occurred_at=at(when),
        observed_at=at(when),
        source="kube-watcher/test",
    )


def test_billing_run_counts_the_sla_credits_it_assessed_and_the_journal_names_them(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, parse_price_book(_SLA_BOOK), at=at("2026-10-01T00:00"))
    sub = _subscription(store, when="2027-01-01T00:00")
    registered = NodeRegistered(
        node="n1", resource_group="gpu-g2", gpus=8, cpu_milli=96_000, memory_mib=393_216
    )
    store.append(
        [_node(registered, "2026-12-31T00:00"), _node(NodeRemoved(node="n1"), "2027-01-20T00:00")]
    )
    done = json.loads(
        cli("billing", "run", "--until", "2027-03-05T00:00:00Z", "--force", "--format", "json")
    )
    assert done["sla_assessed"] == 1 and done["sla_credited_minor"] > 0, done
    lines = [
        line
        for period in ("2027-01", "2027-02", "2027-03")
        for line in json.loads(cli("ledger", "export", "--period", period, "--format", "json"))[
            "lines"
        ]
        if line["account"].startswith("revenue/sla-credits/")
    ]
    assert [(ln["subscription_id"], ln["debit"]) for ln in lines] == [
        (sub, f"{done['sla_credited_minor'] / 100:.2f}")
    ]
