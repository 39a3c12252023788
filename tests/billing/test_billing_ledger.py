"""Double-entry transactions from rating deltas, reversals, deterministic ids, invoices."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.accounts import (
    UnbalancedTransaction,
    balanced_transaction,
    balances,
    receivable_account,
    revenue_account,
    reversal,
    transaction_id,
    transactions_from_deltas,
)
from ledger.events import LedgerTransactionPosted, Posting
from ledger.invoices import NotInvoiceable, build_invoice, invoice_id
from ledger.rating import LineKey, Occupancy, Posted, accrue, rate_occupancy, totals_after

from .helpers import SCHEDULE, T0, at, demo, micros, occupancies, occupancy


def post_all(occ: Occupancy, ticks: list[int]) -> list[LedgerTransactionPosted]:
    """Accrue at each tick, then finally at the end; return every transaction posted."""
    assert occ.end is not None
    posted: dict[LineKey, Posted] = {}
    txns: list[LedgerTransactionPosted] = []
    instants = [T0 + timedelta(microseconds=t) for t in sorted(ticks)] + [occ.end]
    for instant in instants:
        deltas = accrue(occ, SCHEDULE, instant, posted)
        posted = totals_after(posted, deltas)
        txns.extend(transactions_from_deltas(deltas, cause_event_ids=["e-1"]))
    return txns


def test_account_names() -> None:
    assert receivable_account("ws-a") == "receivable/ws-a"
    assert revenue_account("spot", "gpu/A100-SXM4-80GB") == "revenue/spot/gpu/A100-SXM4-80GB"


def test_a_rating_transaction_debits_receivable_and_credits_revenue() -> None:
    occ = occupancy("2026-01-02T00:00", "2026-01-02T01:00", mode="idle")
    (txn,) = transactions_from_deltas(accrue(occ, demo(), occ.end or T0))
    assert [(p.account, p.amount_minor, p.currency) for p in txn.postings] == [
        ("receivable/ws-a", 72, "USD"),
        ("revenue/idle/gpu/any", -72, "USD"),
    ]
    assert txn.period == "2026-01" and txn.reverses is None
    assert txn.usage is not None
    assert (txn.usage.quantity, txn.usage.unit) == (Decimal(1), "GPU-hour")
    assert txn.usage.usage == 1000 * 3_600_000_000
    assert txn.transaction_id == transaction_id(
        "occ-1", "2026-01", "gpu/any", "idle", "2026-01-02T01:00:00.000000Z"
    )


def test_quota_mode_posts_zero_and_still_reports_quantity() -> None:
    occ = occupancy("2026-01-02T00:00", "2026-01-02T08:00", mode="quota")
    (txn,) = transactions_from_deltas(accrue(occ, demo(), at("2026-01-03T00:00")))
    assert [(p.account, p.amount_minor) for p in txn.postings] == [
        ("receivable/ws-a", 0),
        ("revenue/quota/gpu/any", 0),
    ]
    assert txn.usage is not None and txn.usage.quantity == Decimal(8)
    inv = build_invoice("ws-a", "2026-01", [txn], at("2026-02-01T00:00"))
    assert [(li.quantity, li.amount_minor) for li in inv.lines] == [(Decimal(8), 0)]
    assert inv.total_minor == 0


def test_unbalanced_transactions_are_refused() -> None:
    with pytest.raises(UnbalancedTransaction, match="USD"):
        balanced_transaction(
            "t",
            [
                Posting(account="receivable/a", amount_minor=10, currency="USD"),
                Posting(account="revenue/public/cpu", amount_minor=-9, currency="USD"),
            ],
        )
    with pytest.raises(UnbalancedTransaction, match="EUR -5"):
        balanced_transaction(
            "t",
            [
                Posting(account="receivable/a", amount_minor=5, currency="USD"),
                Posting(account="revenue/public/cpu", amount_minor=-5, currency="EUR"),
            ],
        )
    with pytest.raises(UnbalancedTransaction):
        balanced_transaction("t", [])


def test_reversal_negates_and_links() -> None:
    occ = occupancy("2026-01-02T00:00", "2026-01-02T03:00", cpu_milli=2000)
    txns = transactions_from_deltas(accrue(occ, demo(), occ.end or T0))
    for txn in txns:
        rev = reversal(txn, memo="end time corrected")
        assert rev.reverses == txn.transaction_id
        assert rev.transaction_id != txn.transaction_id
        assert reversal(txn, memo="again").transaction_id == rev.transaction_id
        assert balances([*txn.postings, *rev.postings]) == {"USD": 0}
        assert [(p.account, p.amount_minor) for p in rev.postings] == [
            (p.account, -p.amount_minor) for p in txn.postings
        ]
        assert rev.usage is not None and txn.usage is not None
        assert rev.usage.usage == -txn.usage.usage
    # a reversed charge nets out of the invoice; the re-post is what remains
    inv = build_invoice("ws-a", "2026-01", [*txns, *map(reversal, txns)], at("2026-02-01T00:00"))
    assert inv.lines == () and inv.total_minor == 0


@settings(max_examples=50, deadline=None)
@given(occupancies(), st.lists(micros, max_size=8))
def test_every_transaction_balances_and_rerating_gives_identical_ids(
    occ: Occupancy, ticks: list[int]
) -> None:
    first = post_all(occ, ticks)
    for txn in first:
        assert set(balances(txn.postings).values()) == {0}
    again = post_all(occ, ticks)
    assert [t.transaction_id for t in again] == [t.transaction_id for t in first]
    assert again == first
    assert len({t.transaction_id for t in first}) == len(first)
    receivable = sum(
        p.amount_minor for t in first for p in t.postings if p.account.startswith("receivable/")
    )
    assert receivable == rate_occupancy(occ, SCHEDULE).total_minor


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(occupancies(), st.lists(micros, max_size=4)), min_size=1, max_size=4))
def test_invoice_total_is_the_sum_of_its_lines(jobs: list[tuple[Occupancy, list[int]]]) -> None:
    txns: list[LedgerTransactionPosted] = []
    expected: dict[str, int] = {}
    for i, (occ, ticks) in enumerate(jobs):
        occ = Occupancy(**{**occ.__dict__, "occupancy_id": f"o{i}", "job_uid": f"j{i % 2}"})
        txns.extend(post_all(occ, ticks))
        for line in rate_occupancy(occ, SCHEDULE).lines:
            expected[line.period] = expected.get(line.period, 0) + line.amount_minor
    for period in ("2026-01", "2026-02", "2026-03"):
        inv = build_invoice("ws-p", period, txns, at("2026-04-01T00:00"), currency="USD")
        assert inv.total_minor == sum(li.amount_minor for li in inv.lines)
        assert inv.total_minor == expected.get(period, 0)
        keys = [(li.job_uid, li.resource, li.billing_mode) for li in inv.lines]
        assert keys == sorted(set(keys))
        assert inv == build_invoice("ws-p", period, reversed(txns), at("2026-04-01T00:00"),
                                    currency="USD")  # fmt: skip


def test_invoice_lines_per_job_resource_mode_and_deterministic_id() -> None:
    s = demo()
    occs = [
        occupancy("2026-01-02T00:00", "2026-01-02T02:00", occupancy_id="a", job_uid="j1"),
        occupancy("2026-01-03T00:00", "2026-01-03T01:00", occupancy_id="b", job_uid="j1"),
        occupancy("2026-01-03T00:00", "2026-01-03T01:00", occupancy_id="c", job_uid="j2",
                  mode="spot", cpu_milli=1500),
        occupancy("2026-01-03T00:00", "2026-01-03T01:00", occupancy_id="d", job_uid="j3",
                  workspace="ws-other"),
    ]  # fmt: skip
    txns = [t for o in occs for t in transactions_from_deltas(accrue(o, s, at("2026-02-01T00:00")))]
    inv = build_invoice("ws-a", "2026-01", txns, at("2026-02-01T00:00"))
    assert [(li.job_uid, li.resource, li.billing_mode, li.quantity, li.amount_minor)
            for li in inv.lines] == [
        ("j1", "gpu/any", "public", Decimal(3), 720),
        ("j2", "cpu", "spot", Decimal("1.5"), 3),
        ("j2", "gpu/any", "spot", Decimal(1), 90),
    ]  # fmt: skip
    assert inv.total_minor == 813
    assert inv.invoice_id == invoice_id("ws-a", "2026-01") != invoice_id("ws-a", "2026-01", 1)
    assert len(inv.lines[0].transaction_ids) == 2


def test_invoice_refuses_foreign_money() -> None:
    manual = balanced_transaction(
        "m",
        [
            Posting(account="receivable/ws-a", amount_minor=100, currency="USD"),
            Posting(account="revenue/manual", amount_minor=-100, currency="USD"),
        ],
        period="2026-01",
    )
    with pytest.raises(NotInvoiceable, match="without usage"):
        build_invoice("ws-a", "2026-01", [manual], at("2026-02-01T00:00"))
    with pytest.raises(NotInvoiceable, match="pass the currency"):
        build_invoice("ws-a", "2026-01", [], at("2026-02-01T00:00"))
    assert build_invoice("ws-a", "2026-01", [], at("2026-02-01T00:00"), currency="USD").lines == ()
