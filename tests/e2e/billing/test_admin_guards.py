"""Destructive admin commands are guarded: prices publish/spot, billing run, invoices credit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlc_ledger.cli.app import app
from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.clocks import billing_now
from ledger.store.postgres import PostgresEventStore
from processes.billing.rater import decoded_transactions
from tests.support.billing import DEMO_BOOK, at, demo_book, ended, query, started
from tests.support.clis import CliCall


def _book(tmp_path: Path, name: str, **replace: str) -> Path:
    text = DEMO_BOOK.read_text()
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_prices_publish_dry_run_duplicate_instant_and_sanity_bound(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dry = cli("prices", "publish", str(DEMO_BOOK), "--dry-run")
    assert "would append PriceBookPublished to pricebook/demo-2026" in dry
    assert "public gpu/any 2.40" in dry and "appended nothing" in dry
    assert store.head_position() == 0
    cli("prices", "publish", str(DEMO_BOOK), "--effective-at", "2026-11-01T00:00:00Z")
    # the book and its subscription section (node specs)
    records = store.read_stream("pricebook/demo-2026")
    assert [r.envelope.type for r in records] == [
        "PriceBookPublished",
        "SubscriptionPricesPublished",
    ]
    assert all(r.envelope.occurred_at == at("2026-11-01T00:00") for r in records)
    # another book at the same effective_from, 1,000,000x the rate: refused twice over
    wild = _book(tmp_path, "wild", **{"id: demo-2026": "id: wild", '"2.40"': '"2400000"'})
    error = cli("prices", "publish", str(wild), ok=False)
    assert "the same instant as published book(s) demo-2026" in error and "--force" in error
    later = _book(
        tmp_path,
        "later",
        **{"id: demo-2026": "id: later", '"2.40"': '"2400000"', "2026-01-01": "2026-06-01"},
    )
    error = cli("prices", "publish", str(later), ok=False)
    assert "public gpu/any 2400000 USD/h above the sanity bound of 1000" in error
    assert len(json.loads(cli("prices", "list", "--format", "json"))) == 1
    # the bound is a setting
    monkeypatch.setenv("DLC_MAX_RATE", "5000000")
    from dlc_ledger.wiring import context

    context.settings.cache_clear()
    assert "published" in cli("prices", "publish", str(later))
    # --force publishes a duplicate instant
    assert "published" in cli("prices", "publish", str(wild), "--force")
    assert len(json.loads(cli("prices", "list", "--format", "json"))) == 3


def test_prices_spot_refuses_unknown_flavors_and_negative_rates(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    error = cli("prices", "spot", "gpu/any", "-1", "--from", "2026-11-02T00:00:00Z", ok=False)
    assert "No such option" not in error
    assert "a spot rate cannot be negative, got -1" in error
    error = cli("prices", "spot", "gpu/A100", "1.0", "--from", "2026-11-02T00:00:00Z", ok=False)
    assert "prices only cpu, gpu/any, memory" in error
    error = cli("prices", "spot", "gpu/any", "1.0", "--from", "2025-11-02T00:00:00Z", ok=False)
    assert "no price book in force" in error
    error = cli("prices", "spot", "gpu/any", "99999", "--from", "2026-11-02T00:00:00Z", ok=False)
    assert "above the sanity bound" in error
    assert "recorded" in cli(
        "prices", "spot", "gpu/A100", "1.0", "--from", "2026-11-02T00:00:00Z", "--force"
    )
    assert "recorded" in cli("prices", "spot", "gpu/any", "1.10", "--from", "2026-11-02T00:00:00Z")


def test_billing_run_until_beyond_the_cluster_clock_needs_force(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("open", at("2026-11-05T00:00"))])
    error = cli("billing", "run", "--until", "2099-01-01T00:00:00Z", ok=False)
    assert "is beyond the latest cluster time observed (2026-11-05T00:00:00Z)" in error
    assert query(store, "SELECT count(*) FROM events WHERE type = 'InvoiceIssued'") == [(0,)]
    # an explicit until at the cluster clock is fine
    assert "issued 0 invoices" in cli("billing", "run", "--until", "2026-11-05T00:00:00Z")
    out = cli("billing", "run", "--grace-hours", "-1000", ok=False)
    assert "Invalid value for '--grace-hours'" in out and "greater than or equal to" in out
    assert "issued 1 invoices" in cli(
        "billing", "run", "--until", "2026-12-02T00:00:00Z", "--force"
    )


def test_a_run_never_posts_usage_after_its_until(store: PostgresEventStore) -> None:
    """Finals of occupancies that end after the run's until wait for a later run."""
    from dlc_ledger.services.billing import tick

    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append(
        [
            started("a", at("2026-11-05T00:00")),
            ended("a", at("2026-11-05T10:00")),
            started("b", at("2026-11-05T00:00")),
            ended("b", at("2027-03-30T00:00")),
            started("c", at("2027-02-01T00:00")),
            ended("c", at("2027-02-02T00:00")),
        ]
    )
    until = at("2026-12-05T00:00")
    first = tick(store, until)
    txns = decoded_transactions(store.read_by_type(["LedgerTransactionPosted"], limit=10_000))
    assert txns and max(t.usage.as_of for t in txns if t.usage) <= until
    assert {t.usage.job_uid for t in txns if t.usage} == {"job-a", "job-b"}
    assert first.rated.finals == 1 and first.rated.accrued == 1
    # a later run finishes what the first left: b's and c's finals
    tick(store, at("2027-04-02T00:00"))
    totals = dict(
        query(
            store,
            "SELECT occupancy_id, sum(amount_minor)::bigint FROM billing_line_totals "
            "GROUP BY occupancy_id",
        )
    )
    hours_b = (at("2027-03-30T00:00") - at("2026-11-05T00:00")) / timedelta(hours=1)
    assert totals == {"a": 2400, "b": round(hours_b * 240), "c": 24 * 240}


def test_billing_defaults_to_the_cluster_clock_of_a_replayed_history() -> None:
    wall = datetime(2026, 12, 5, 12, tzinfo=UTC)
    assert billing_now(None, wall).at == wall
    assert billing_now(wall - timedelta(days=3), wall).at == wall  # a quiet live cluster
    old = datetime(2026, 3, 30, tzinfo=UTC)
    assert billing_now(old, wall).at == old and billing_now(old, wall).replayed
    ahead = datetime(2027, 3, 30, tzinfo=UTC)
    assert billing_now(ahead, wall).at == ahead


def test_billing_run_reissues_a_voided_invoice_on_replayed_data(
    store: PostgresEventStore, cli: CliCall
) -> None:
    """Without --until, a run on history months behind the wall clock bills up to its
    latest cluster time (and says so), so a voided invoice is re-issued."""
    publish_price_book(store, demo_book(), at=at("2026-01-01T00:00"))
    store.append(
        [
            started("a", at("2026-02-05T00:00")),
            ended("a", at("2026-02-05T10:00")),
            started("late", at("2026-03-20T00:00")),
        ]
    )
    result = CliRunner().invoke(app, ["billing", "run"])
    assert result.exit_code == 0, result.output
    assert "billing up to the latest cluster time observed, 2026-03-20T00:00:00Z" in result.stderr
    assert "issued 1 invoices" in result.stdout
    (invoice,) = json.loads(cli("invoices", "list", "--format", "json"))
    cli("invoices", "void", invoice["invoice_id"], "--reason", "wrong address")
    assert "issued 1 invoices" in cli("billing", "run")
    statuses = sorted(r["status"] for r in json.loads(cli("invoices", "list", "--format", "json")))
    assert statuses == ["issued", "voided"]


def test_credit_notes_are_idempotent_exact_and_listed(
    store: PostgresEventStore, cli: CliCall
) -> None:
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    store.append([started("a", at("2026-11-05T00:00")), ended("a", at("2026-11-05T10:00"))])
    from dlc_ledger.services.billing import tick

    (invoice_id,) = tick(store, at("2026-12-02T00:00")).invoices
    error = cli("invoices", "credit", invoice_id, "--amount", "1.005", "--reason", "x", ok=False)
    assert "more decimals than USD allows (scale 2)" in error
    first = cli("invoices", "credit", invoice_id, "--amount", "5.00", "--reason", "goodwill")
    again = cli("invoices", "credit", invoice_id, "--amount", "5.00", "--reason", "goodwill")
    assert "issued" in first and "already issued, nothing added" in again
    assert first.split(":")[0] == again.split(":")[0]  # the same note id
    keyed = ["--idempotency-key", "ticket-42"]
    cli("invoices", "credit", invoice_id, "--amount", "1.50", "--reason", "sla", *keyed)
    assert "nothing added" in cli(
        "invoices", "credit", invoice_id, "--amount", "1.50", "--reason", "sla", *keyed
    )
    error = cli(
        "invoices", "credit", invoice_id, "--amount", "2.50", "--reason", "sla", *keyed, ok=False
    )
    assert "idempotency key 'ticket-42' was used for credit note" in error
    notes = json.loads(cli("invoices", "credits", "list", "--format", "json"))
    assert [(n["amount_minor"], n["reason"], n["workspace"]) for n in notes] == [
        (500, "goodwill", "ws-a"),
        (150, "sla", "ws-a"),
    ]
    # an unknown invoice is an error like every other filter, not "(no rows)"
    assert "no invoice 'nope'" in cli("invoices", "credits", "list", "--invoice", "nope", ok=False)
    (inv,) = json.loads(cli("invoices", "list", "--format", "json"))
    assert inv["credited_minor"] == 650
