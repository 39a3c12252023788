"""Period close, late usage, --as-of, the price and invoice commands, the migration branch."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from sqlalchemy import inspect

from dlc_ledger.services.billing import publish_price_book, tick
from ledger.store.engines import make_engine
from ledger.store.postgres import PostgresEventStore
from migrations.runner import downgrade, upgrade
from projections.billing.projection import catch_up_billing
from tests.support.billing import DEMO_BOOK, at, demo_book, ended, query, started
from tests.support.clis import CliCall
from tests.support.databases import TemplateDatabases


def test_late_usage_after_the_invoice_goes_to_the_next_period_as_a_linked_adjustment(
    store: PostgresEventStore,
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    issued = tick(store, at("2026-12-02T00:00")).invoices
    assert len(issued) == 1
    (nov,) = issued
    before = store.read_stream(f"invoice/{nov}")
    # a pod of November, recorded only now
    store.append([started("late", at("2026-11-20T00:00")), ended("late", at("2026-11-20T05:00"))])
    assert tick(store, at("2026-12-03T00:00")).invoices == ()
    assert store.read_stream(f"invoice/{nov}") == before
    catch_up_billing(store)
    assert query(
        store, "SELECT total_minor FROM billing_invoices WHERE invoice_id = :i", i=nov
    ) == [(2400,)]
    (adj,) = query(
        store,
        "SELECT period, usage_period, memo, amount_minor FROM billing_transactions "
        "WHERE occupancy_id = 'late'",
    )
    assert adj.period == "2026-12" and adj.usage_period == "2026-11"
    assert "2026-11" in adj.memo and "late adjustment" in adj.memo
    assert adj.amount_minor == 1200
    (dec,) = tick(store, at("2027-01-02T00:00")).invoices
    catch_up_billing(store)
    lines = query(
        store,
        "SELECT resource, billing_mode, amount_minor, transaction_ids "
        "FROM billing_invoice_lines WHERE invoice_id = :i",
        i=dec,
    )
    # lines aggregate per resource x mode x rate (not per job); the late txn is on it
    (late_txn,) = query(
        store, "SELECT transaction_id FROM billing_transactions WHERE occupancy_id = 'late'"
    )
    assert lines == [("gpu/any", "public", 1200, [late_txn.transaction_id])]


def _recorded_pause() -> datetime:
    time.sleep(0.01)
    moment = datetime.now(UTC)
    time.sleep(0.01)
    return moment


def test_as_of_before_a_late_event_does_not_show_it_and_after_does(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    tick(store, at("2026-11-06T00:00"))
    between = _recorded_pause()
    store.append([started("b", at("2026-11-05T00:00")), ended("b", at("2026-11-05T02:00"))])
    tick(store, at("2026-11-06T00:00"))
    after = _recorded_pause()

    def usage(as_of: datetime) -> list[dict[str, object]]:
        out = cli(
            "report", "usage", "--group-by", "workspace", "--to", "2026-12-01T00:00:00Z",
            "--as-of", as_of.isoformat(), "--format", "json",
        )  # fmt: skip
        return json.loads(out)  # type: ignore[no-any-return]

    def cost(as_of: datetime, *extra: str) -> list[dict[str, object]]:
        out = cli(
            "report", "cost", "--group-by", "workspace,month", "--from", "2026-11-01T00:00:00Z",
            "--to", "2026-12-01T00:00:00Z", "--as-of", as_of.isoformat(), "--format", "json",
            *extra,
        )  # fmt: skip
        return json.loads(out)  # type: ignore[no-any-return]

    hour = 1000 * 3600
    assert usage(between) == [
        {"workspace": "ws-a", "mgpu_seconds": 10 * hour, "cpu_milli_seconds": 0,
         "memory_mib_seconds": 0}
    ]  # fmt: skip
    assert usage(after)[0]["mgpu_seconds"] == 12 * hour
    expected = {"workspace": "ws-a", "month": "2026-11", "currency": "USD", "scale": 2}
    cents = {
        "cost_minor": 2400,
        "cost": "24.00",
        "cost_minor_precise": "2400",
        "cost_precise": "24",
    }
    assert cost(between) == [{**expected, **cents}]
    assert cost(between, "--source", "rated") == [{**expected, **cents}]
    cents = {
        "cost_minor": 2880,
        "cost": "28.80",
        "cost_minor_precise": "2880",
        "cost_precise": "28.8",
    }
    assert cost(after) == [{**expected, **cents}]
    assert cost(after, "--source", "rated") == [{**expected, **cents}]
    csv_out = cli("report", "usage", "--group-by", "workspace,day", "--format", "csv")
    assert csv_out.splitlines()[0] == (
        "workspace,day,mgpu_seconds,cpu_milli_seconds,memory_mib_seconds"
    )
    assert csv_out.splitlines()[1] == f"ws-a,2026-11-05,{12 * hour},0,0"


def test_price_and_invoice_commands(store: PostgresEventStore, cli: CliCall, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert "published" in cli("prices", "publish", str(DEMO_BOOK))
    assert "nothing added" in cli("prices", "publish", str(DEMO_BOOK))
    changed = tmp_path / "changed.yaml"
    changed.write_text(DEMO_BOOK.read_text().replace('"2.40"', '"2.50"'))
    error = cli("prices", "publish", str(changed), ok=False)
    assert "already published with different content" in error
    assert len(store.read_stream("pricebook/demo-2026")) == 2  # the book and its node specs
    cli("prices", "spot", "gpu/any", "1.10", "--from", "2026-11-02T00:00:00Z")
    listed = json.loads(cli("prices", "list", "--format", "json"))
    assert [r["kind"] for r in listed] == ["book", "spot"]
    assert "2.40" in cli("prices", "show", "demo-2026")

    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2026-12-02T00:00:00Z", "--force"
    )
    (invoice,) = json.loads(cli("invoices", "list", "--format", "json"))
    assert invoice["total_minor"] == 2400 and invoice["status"] == "issued"
    detail = json.loads(cli("invoices", "show", invoice["invoice_id"], "--format", "json"))
    assert sum(line["amount_minor"] for line in detail["lines"]) == detail["total_minor"]
    # one line per resource x mode x rate; the jobs it sums are its breakdown
    (line,) = detail["lines"]
    assert line["jobs"] == [{"job_uid": "job-a", "quantity": "10", "amount_minor_precise": "2400"}]
    assert "2.4" in cli("invoices", "show", invoice["invoice_id"], "--format", "csv")
    cli("invoices", "credit", invoice["invoice_id"], "--amount", "5.00", "--reason", "goodwill")
    too_much = cli(
        "invoices", "credit", invoice["invoice_id"], "--amount", "50", "--reason", "x", ok=False
    )
    assert "exceeds" in too_much
    cli("invoices", "void", invoice["invoice_id"], "--reason", "wrong address")
    assert "already voided" in cli(
        "invoices", "void", invoice["invoice_id"], "--reason", "again", ok=False
    )
    # the voided period reopens: the next run issues revision 1
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2026-12-02T01:00:00Z", "--force"
    )
    statuses = sorted(r["status"] for r in json.loads(cli("invoices", "list", "--format", "json")))
    assert statuses == ["issued", "voided"]
    catch_up_billing(store)
    unbalanced = query(
        store,
        "SELECT transaction_id FROM billing_postings GROUP BY transaction_id "
        "HAVING sum(amount_minor) <> 0",
    )
    assert unbalanced == []


def test_migration_branch_up_down_up(databases: TemplateDatabases) -> None:
    url = databases.empty()
    engine = make_engine(url)
    try:
        upgrade(engine)
        assert "billing_transactions" in inspect(engine).get_table_names()
        downgrade(engine, "billing@-8")  # 0029, 0028, 0027, 0024, 0018, 0017, 0012, then 0004
        names = inspect(engine).get_table_names()
        assert not [n for n in names if n.startswith("billing_")]
        assert "events" in names
        upgrade(engine)
        assert "billing_invoice_lines" in inspect(engine).get_table_names()
        assert "finance_invoice_lines" in inspect(engine).get_view_names()
    finally:
        engine.dispose()
        databases.drop(url)
