"""``dlc-ledger ledger export``: a month's postings as a general ledger imports them, equal
to the trial balance's movements over the month, balanced per transaction and currency."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import uuid4

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.services.billing import issue_credit_note, publish_price_book, tick, void_invoice
from dlc_ledger.services.subscriptions import cancel, purchase
from ledger.accounts import balanced_transaction, transaction_envelope
from ledger.events import Posting
from ledger.store.postgres import PostgresEventStore
from projections.billing import catch_up_billing, period_bounds, read_books, read_journal
from tests.support.billing import at, demo_book, ended, query, started
from tests.support.clis import CliCall

PERIODS = ("2026-10", "2026-11", "2026-12", "2027-01")
BOUNDS = {
    "2026-10": ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z"),
    "2026-11": ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"),
    "2026-12": ("2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"),
    "2027-01": ("2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"),
}


def _history(store: PostgresEventStore) -> dict[str, str]:
    """Usage in fractions of a cent over three months, a job across a month's end, an
    invoice rounded, credited, voided and re-issued, a subscription recognised daily and
    one refunded: every kind of posting the ledger makes."""
    publish_price_book(store, demo_book(), at=at("2026-10-01T00:00"))
    start = at("2026-11-05T00:00")
    store.append(
        [
            started("a", start),
            ended("a", start + timedelta(seconds=37.5 * 3)),
            started("c", start, workspace="ws-a", mode="idle"),
            ended("c", start + timedelta(seconds=41)),
            started("long", at("2026-11-28T10:17:03"), workspace="ws-b", mgpu=500),
            ended("long", at("2026-12-03T07:41:11")),
        ]
    )
    order = {"group": "gpu-g2", "spec": "ml.g2.8xlarge", "nodes": 1, "term": "month",
             "workspace": "ws-ls", "principal": "test"}  # fmt: skip
    sub = purchase(store, **order, at=at("2026-11-10T00:00"))  # type: ignore[arg-type]
    gone = purchase(store, **order, at=at("2026-11-20T00:00"), key="b")  # type: ignore[arg-type]
    tick(store, at("2026-11-30T13:00"))  # accrues "long" into November
    tick(store, at("2026-12-02T00:00"))  # November's invoices
    ((nov,),) = query(
        store,
        "SELECT invoice_id FROM billing_invoices WHERE workspace = 'ws-a' AND period = '2026-11'",
    )
    cancel(store, gone.subscription.subscription_id, principal="test", immediately=True,
           at=at("2026-12-05T12:00"))  # fmt: skip
    note = issue_credit_note(store, nov, "0.05", "goodwill", principal="test").note
    tick(store, at("2026-12-20T00:00"))
    void_invoice(store, nov, "wrong", principal="test")
    tick(store, at("2027-01-03T00:00"))  # the re-issue, December's invoices
    return {"invoice": nov, "note": note.credit_note_id,
            "subscription": sub.subscription.subscription_id}  # fmt: skip


def _balances(cli: CliCall, instant: str) -> dict[str, Decimal]:
    books = json.loads(cli("ledger", "balance", "--at", instant, "--format", "json"))
    return {row["account"]: Decimal(row["balance"]) for row in books["accounts"]}


def _signed(line: dict[str, Any]) -> Decimal:
    return Decimal(line["debit"] or 0) - Decimal(line["credit"] or 0)


def test_the_export_is_the_trial_balances_movements_balanced_per_entry(
    store: PostgresEventStore, cli: CliCall, tmp_path: Path
) -> None:
    made = _history(store)
    everything: list[dict[str, Any]] = []
    for period in PERIODS:
        document = json.loads(cli("ledger", "export", "--period", period, "--format", "json"))
        lines = document["lines"]
        everything.extend(lines)
        # the movements of the month: the trial balance at its end minus at its start
        begin, end = (_balances(cli, instant) for instant in BOUNDS[period])
        movement = {a: end.get(a, Decimal(0)) - begin.get(a, Decimal(0)) for a in end}
        exported: dict[str, Decimal] = defaultdict(Decimal)
        whole: dict[str, Decimal] = defaultdict(Decimal)
        for line in lines:
            exported[line["account"]] += Decimal(line["amount_precise"])
            whole[line["account"]] += _signed(line)
            assert line["date"].startswith(period)
        assert {a: m for a, m in movement.items() if m} == {a: m for a, m in exported.items() if m}
        for account, amount in whole.items():  # whole cents, within two cents of the books
            assert abs(amount - movement.get(account, Decimal(0))) < Decimal("0.02"), account
        # every journal entry balances in whole cents, and so does the month
        by_entry: dict[str, Decimal] = defaultdict(Decimal)
        for line in lines:
            by_entry[line["journal_id"]] += _signed(line)
            for side in ("debit", "credit"):
                value = line[side]
                assert value is None or ("E" not in value and len(value.split(".")[1]) == 2)
            assert (line["debit"] is None) != (line["credit"] is None)
        assert set(by_entry.values()) <= {Decimal(0)}
        for total in document["totals"]:
            assert total["balanced"] and total["debit"] == total["credit"]
        # the CSV is the same lines
        out = tmp_path / f"{period}.csv"
        cli("ledger", "export", "--period", period, "--output", str(out))
        rows = list(csv.DictReader(io.StringIO(out.read_text())))
        assert [(r["journal_id"], r["account"], r["debit"], r["credit"]) for r in rows] == [
            (ln["journal_id"], ln["account"], ln["debit"] or "", ln["credit"] or "") for ln in lines
        ]
        assert rows == [] or rows[0]["cause_event_ids"] == " ".join(lines[0]["cause_event_ids"])
    assert everything, "the history posts nothing?"
    # references back to what each posting is for
    nov = [ln for ln in everything if ln["invoice_id"] == made["invoice"]]
    assert any(ln["account"] == "revenue/rounding" for ln in nov)  # its rounding, and reversal
    # usage points to the invoice that bills it now: the re-issue of the voided one
    ((reissue,),) = query(
        store,
        "SELECT invoice_id FROM billing_invoices WHERE workspace = 'ws-a' "
        "AND period = '2026-11' AND status = 'issued'",
    )
    assert reissue != made["invoice"]
    assert {ln["invoice_id"] for ln in everything if ln["occupancy_id"] == "a"} == {reissue}
    assert {ln["job_uid"] for ln in everything if ln["occupancy_id"] == "a"} == {"job-a"}
    (credit,) = {ln["journal_id"] for ln in everything if ln["credit_note_id"] == made["note"]}
    assert {ln["invoice_id"] for ln in everything if ln["journal_id"] == credit} == {
        made["invoice"]
    }
    recognised = [ln for ln in everything if ln["subscription_id"] == made["subscription"]]
    assert {ln["account"].split("/")[0] for ln in recognised} == {
        "receivable",
        "deferred",
        "revenue",
    }
    # a job across November's end: its cost is split between the two months' exports
    long = {ln["date"][:7] for ln in everything if ln["occupancy_id"] == "long"}
    assert long == {"2026-11", "2026-12"}


def test_an_empty_month_is_a_header_and_a_bad_period_an_error(cli: CliCall) -> None:
    assert cli("ledger", "export", "--period", "2027-03").startswith("date,journal_id,line,")
    assert "not a period" in cli("ledger", "export", "--period", "2027-13", ok=False)


def test_the_export_through_the_api_for_bookkeepers_only(
    store: PostgresEventStore, cli: CliCall
) -> None:
    from fastapi.testclient import TestClient

    from dlc_ledger.api.app import create_app
    from dlc_ledger.services.access import create_token

    _history(store)
    secrets = {
        role: create_token(store, [role], name=role, created_by="test").secret
        for role in ("finance", "auditor", "workspace:ws-a")
    }
    with TestClient(create_app(store), raise_server_exceptions=False) as client:

        def get(role: str, **params: str) -> object:
            auth = {"Authorization": f"Bearer {secrets[role]}"}
            return client.get("/v1/ledger/export", headers=auth, params=params)

        response = get("finance", period="2026-11")
        assert response.status_code == 200, response.text  # type: ignore[attr-defined]
        body = response.json()  # type: ignore[attr-defined]
        shown = json.loads(cli("ledger", "export", "--period", "2026-11", "--format", "json"))
        assert body["lines"] == shown["lines"] and body["totals"] == shown["totals"]
        assert (body["from"], body["to"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
        as_csv = get("auditor", period="2026-11", format="csv")
        assert as_csv.headers["content-type"].startswith("text/csv")  # type: ignore[attr-defined]
        rows = list(csv.DictReader(io.StringIO(as_csv.text)))  # type: ignore[attr-defined]
        assert [r["journal_id"] for r in rows] == [ln["journal_id"] for ln in body["lines"]]
        assert get("workspace:ws-a", period="2026-11").status_code == 403  # type: ignore[attr-defined]
        bad = get("finance", period="2026-13")
        assert bad.status_code in (400, 422)  # type: ignore[attr-defined]
        assert bad.headers["content-type"].startswith("application/problem+json")  # type: ignore[attr-defined]


_ACCOUNTS = ("receivable/ws-a", "receivable/ws-b", "revenue/public/gpu/any", "revenue/rounding")
_UNIT = 10**9  # precise units of a cent (ledger.money.PRECISE_DIGITS)


@st.composite
def _postings(draw: st.DrawFn) -> list[tuple[datetime, list[tuple[str, Decimal]]]]:
    """Balanced transactions at instants around the months' ends (midnight included), each
    leg a few dollars at sub-minor precision."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        when = at("2027-03-01T00:00") + timedelta(
            hours=draw(st.sampled_from([-25, -1, 0, 1, 24 * 31 - 1, 24 * 31, 24 * 31 + 3]))
        )
        amounts = draw(st.lists(st.integers(-900 * _UNIT, 900 * _UNIT), min_size=1, max_size=3))
        accounts = draw(
            st.lists(
                st.sampled_from(_ACCOUNTS), min_size=len(amounts) + 1, max_size=len(amounts) + 1
            )
        )
        legs = [
            (account, Decimal(amount).scaleb(-9))
            for account, amount in zip(accounts, [*amounts, -sum(amounts)], strict=True)
        ]
        out.append((when, legs))
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_postings())
def test_any_postings_export_as_the_trial_balances_movements(
    store: PostgresEventStore, txns: list[tuple[datetime, list[tuple[str, Decimal]]]]
) -> None:
    """Whatever the store holds already (earlier examples' postings), each month's export
    is the trial balance's movement over it, balanced per entry in whole cents."""
    envelopes = []
    for when, legs in txns:
        txn = balanced_transaction(
            str(uuid4()),
            [Posting(account=a, amount_minor=amount, currency="USD") for a, amount in legs],
            memo="property",
        )
        envelopes.append(transaction_envelope(txn, when))
    store.append(envelopes)
    catch_up_billing(store)
    scale_of = lambda currency: 2  # noqa: E731
    with store.reading() as conn:
        for period in ("2027-02", "2027-03", "2027-04"):
            start, end = period_bounds(period)
            found = read_journal(conn, scale_of, period)
            before = {
                r["account"]: Decimal(r["balance"])
                for r in read_books(conn, scale_of, start).balance.rows
            }
            after = {
                r["account"]: Decimal(r["balance"])
                for r in read_books(conn, scale_of, end).balance.rows
            }
            moved: dict[str, Decimal] = defaultdict(Decimal)
            entries: dict[str, Decimal] = defaultdict(Decimal)
            for line in found.lines:
                moved[line["account"]] += Decimal(line["amount_precise"])
                entries[line["journal_id"]] += _signed(line)
            for account in set(after) | set(moved):
                assert moved[account] == after.get(account, 0) - before.get(account, 0), account
            assert set(entries.values()) <= {Decimal(0)}
            assert all(t["balanced"] for t in found.totals)


def test_a_period_out_of_an_instants_range_is_refused(cli: CliCall) -> None:
    for period in ("0000-01", "9999-12"):
        assert "out of range" in cli("ledger", "export", "--period", period, ok=False)
