"""Double-entry transactions from rating deltas, reversals, deterministic ids, invoices."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

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
from ledger.invoices import NotInvoiceable, build_invoice, invoice_id, invoice_rounding
from ledger.money import precise_decimal
from ledger.rating import (
    LineKey,
    Occupancy,
    Posted,
    accrue,
    rate_key,
    rate_occupancy,
    totals_after,
)

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
    # a line is posted per rate part: the rate (idle = 2.40 x 0.30) joins the id
    assert txn.usage.rate == Decimal("0.72")
    assert txn.transaction_id == transaction_id(
        "occ-1", "2026-01", "gpu/any", "idle", "2026-01-02T01:00:00.000000Z", "0.72"
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
    # postings carry the rated amount below the minor unit, never rounded per segment
    assert receivable == precise_decimal(rate_occupancy(occ, SCHEDULE).total_precise)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(occupancies(), st.lists(micros, max_size=4)), min_size=1, max_size=4))
def test_invoice_lines_are_rounded_once_from_the_exact_usage_times_rate(
    jobs: list[tuple[Occupancy, list[int]]],
) -> None:
    txns: list[LedgerTransactionPosted] = []
    exact: dict[tuple[str, str, str, Decimal], Fraction] = {}
    for i, (occ, ticks) in enumerate(jobs):
        occ = Occupancy(**{**occ.__dict__, "occupancy_id": f"o{i}", "job_uid": f"j{i % 2}"})
        txns.extend(post_all(occ, ticks))
        for line in rate_occupancy(occ, SCHEDULE).lines:
            for seg in line.segments:
                key = (line.period, line.resource, line.billing_mode, seg.rate.rate)
                exact[key] = exact.get(key, Fraction(0)) + seg.amount_exact * 100
    for period in ("2026-01", "2026-02", "2026-03"):
        inv = build_invoice("ws-p", period, txns, at("2026-04-01T00:00"), currency="USD")
        assert inv.total_minor == sum(li.amount_minor for li in inv.lines)
        keys = [(li.resource, li.billing_mode, li.rate) for li in inv.lines]
        assert keys == sorted(set(keys), key=lambda k: (k[0], k[1], rate_key(k[2] or 0)))
        for li in inv.lines:
            assert li.rate is not None and li.amount_precise is not None
            truth = exact.pop((period, li.resource, li.billing_mode, li.rate))
            # half a minor unit from the one rounding, plus 10**-9 per posted part at most
            assert abs(li.amount_minor - truth) <= Fraction(1, 2) + Fraction(len(txns), 10**9)
            assert li.amount_minor == round(Fraction(li.amount_precise))
        assert inv == build_invoice("ws-p", period, reversed(txns), at("2026-04-01T00:00"),
                                    currency="USD")  # fmt: skip
    assert all(v == 0 for k, v in exact.items() if k[0] in ("2026-01", "2026-02", "2026-03"))


def test_invoice_lines_per_resource_mode_and_rate_and_deterministic_id() -> None:
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
    assert [(li.job_uid, li.resource, li.billing_mode, li.rate, li.quantity, li.amount_minor)
            for li in inv.lines] == [
        (None, "cpu", "spot", Decimal("0.020"), Decimal("1.5"), 3),
        (None, "gpu/any", "public", Decimal("2.40"), Decimal(3), 720),
        (None, "gpu/any", "spot", Decimal("0.90"), Decimal(1), 90),
    ]  # fmt: skip
    assert inv.total_minor == 813
    assert inv.rounding_transaction_id is None  # every line came out whole
    assert inv.invoice_id == invoice_id("ws-a", "2026-01") != invoice_id("ws-a", "2026-01", 1)
    assert len(inv.lines[1].transaction_ids) == 2  # both pods of j1


def test_a_thousand_jobs_under_half_a_cent_each_are_billed_within_half_a_cent_per_line() -> None:
    """Issue 24 item 9: rounding each job (or accrual) to the cent billed these at zero."""
    s = demo()
    txns: list[LedgerTransactionPosted] = []
    exact = Fraction(0)
    for i in range(1000):
        # 50 mGPU idle for 5 to 7m12s: 0.72 x 0.05 x 0.12 = 0.00432 USD at most, under half a cent
        occ = occupancy("2026-01-02T00:00", "2026-01-02T00:00", occupancy_id=f"o{i}",
                        job_uid=f"j{i}", mode="idle", mgpu=50)  # fmt: skip
        end = occ.start + timedelta(minutes=5 + i % 3, seconds=i % 13)
        occ = Occupancy(**{**occ.__dict__, "end": end})
        rating = rate_occupancy(occ, s)
        assert rating.total_minor == 0  # each job alone rounds to nothing
        exact += sum((seg.amount_exact * 100 for seg in rating.segments), Fraction(0))
        # hourly accrual ticks would not matter: the run is shorter; final posting only
        txns.extend(transactions_from_deltas(accrue(occ, s, end)))
    inv = build_invoice("ws-a", "2026-01", txns, at("2026-02-01T00:00"))
    (line,) = inv.lines
    assert (line.resource, line.billing_mode, line.rate) == ("gpu/any", "idle", Decimal("0.72"))
    assert exact > 300  # more than 3 USD, which per-job rounding billed as 0
    assert abs(line.amount_minor - exact) <= Fraction(1, 2)
    assert inv.total_minor == line.amount_minor
    # the rounding is posted so the period's receivable is the invoice total exactly
    rounding = invoice_rounding(inv)
    assert rounding is not None and rounding.transaction_id == inv.rounding_transaction_id
    owed = sum(
        (p.amount_minor for t in [*txns, rounding] for p in t.postings
         if p.account == "receivable/ws-a"),
        Decimal(0),
    )  # fmt: skip
    assert owed == inv.total_minor
    assert {p.account for p in rounding.postings} == {"receivable/ws-a", "revenue/rounding"}
    assert set(balances(rounding.postings).values()) == {0}


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
