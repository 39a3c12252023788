"""Half-even rounding pinned on exact ties, where it differs from half-up.

The property tests of invoices draw amounts at 10**-9 of a minor unit and almost never
land on exactly half a cent, so rounding ties up (or away from zero) passed them. These
known answers sit on ties: 2.5 minor units owe 2, 3.5 owe 4, a credit of -2.5 is -2 and
one of -3.5 is -4, both in the money functions and on invoice lines built from real
rating transactions (the demo book: 2.40 USD per GPU-hour is 1/15 cent per GPU-second,
so 37.5 seconds of one GPU cost exactly 2.5 cents).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ledger.accounts import reversal, transactions_from_deltas
from ledger.events import BillingMode, InvoiceIssued, LedgerTransactionPosted
from ledger.invoices import build_invoice, invoice_rounding
from ledger.money import round_precise, to_precise
from ledger.prices import PriceSchedule
from ledger.rating import Occupancy, accrue

from .helpers import at, demo, occupancy

SCHEDULE: PriceSchedule = demo()
ISSUED = at("2026-03-01T00:00")


@pytest.mark.parametrize(
    ("precise", "owed"),
    [
        (500_000_000, 0),  # 0.5
        (1_500_000_000, 2),  # 1.5
        (2_500_000_000, 2),  # 2.5
        (3_500_000_000, 4),  # 3.5
        (4_500_000_000, 4),  # 4.5
        (-500_000_000, 0),  # -0.5
        (-1_500_000_000, -2),  # -1.5
        (-2_500_000_000, -2),  # -2.5
        (-3_500_000_000, -4),  # -3.5
        # one 10**-9 off a tie is no tie: nearest, either way
        (2_500_000_001, 3),
        (2_499_999_999, 2),
        (-2_500_000_001, -3),
        (-3_499_999_999, -3),
    ],
)
def test_round_precise_rounds_ties_to_even(precise: int, owed: int) -> None:
    assert round_precise(precise) == owed


@pytest.mark.parametrize(
    ("amount", "precise"),
    [
        # 2.5 and 3.5 billionths of a cent (at scale 2 one is 10**-11 currency units)
        ("0.000000000025", 2),
        ("0.000000000035", 4),
        ("-0.000000000025", -2),
        ("-0.000000000035", -4),
        ("0.0000000000250001", 3),
    ],
)
def test_to_precise_rounds_ties_to_even(amount: str, precise: int) -> None:
    assert to_precise(Decimal(amount), 2) == precise


def _charges(
    seconds: float, *, mode: BillingMode = "public", occupancy_id: str = "occ-1"
) -> tuple[LedgerTransactionPosted, ...]:
    """The rating transactions of one GPU for ``seconds`` in January (cpu and memory 0)."""
    start = occupancy("2026-01-02T00:00", None, mode=mode, occupancy_id=occupancy_id)
    occ = Occupancy(**{**start.__dict__, "end": start.start + timedelta(seconds=seconds)})
    assert occ.end is not None
    return transactions_from_deltas(accrue(occ, SCHEDULE, occ.end))


def _line_amounts(invoice: InvoiceIssued) -> list[tuple[str, Decimal | None, int]]:
    return [(li.billing_mode, li.amount_precise, li.amount_minor) for li in invoice.lines]


def _posted_rounding(invoice: InvoiceIssued) -> Decimal | None:
    """What the invoice's rounding transaction posts to the workspace's receivable."""
    txn = invoice_rounding(invoice)
    if txn is None:
        return None
    (amount,) = [p.amount_minor for p in txn.postings if p.account == "receivable/ws-a"]
    return amount


@pytest.mark.parametrize(
    ("seconds", "precise", "charged", "credited"),
    [
        (7.5, "0.5", 0, 0),
        (22.5, "1.5", 2, -2),
        (37.5, "2.5", 2, -2),
        (52.5, "3.5", 4, -4),
        (67.5, "4.5", 4, -4),
        # a microsecond more than 2.5 cents (1/15 of 10**-6 cent) is over the tie
        (37.500001, "2.500000067", 3, -3),
    ],
)
def test_an_invoice_line_on_a_tie_rounds_half_even_and_so_does_its_credit(
    seconds: float, precise: str, charged: int, credited: int
) -> None:
    charges = _charges(seconds)
    assert sum(p.amount_minor for t in charges for p in t.postings if p.amount_minor > 0) == (
        Decimal(precise)
    )
    invoice = build_invoice("ws-a", "2026-01", charges, ISSUED)
    assert _line_amounts(invoice) == [("public", Decimal(precise), charged)]
    assert invoice.total_minor == charged
    # the rounding posted with the invoice is what the line rounded off
    assert _posted_rounding(invoice) == charged - Decimal(precise)

    # the charge reversed in February: a credit line, rounded half-even as well
    credits = [reversal(t, period="2026-02") for t in charges]
    credit = build_invoice("ws-a", "2026-02", [*charges, *credits], ISSUED)
    assert _line_amounts(credit) == [("public", -Decimal(precise), credited)]
    assert credit.total_minor == credited
    assert _posted_rounding(credit) == credited + Decimal(precise)


@pytest.mark.parametrize(("seconds", "line", "owed"), [(18.75, "2.5", 2), (26.25, "3.5", 4)])
def test_a_tie_made_of_two_jobs_rounds_half_even_once(seconds: float, line: str, owed: int) -> None:
    """1.25 + 1.25 cents is a line of 2.5, owing 2; 1.75 + 1.75 is 3.5, owing 4."""
    txns = [*_charges(seconds, occupancy_id="a"), *_charges(seconds, occupancy_id="b")]
    invoice = build_invoice("ws-a", "2026-01", txns, ISSUED)
    assert _line_amounts(invoice) == [("public", Decimal(line), owed)]
    assert invoice.total_minor == owed
    assert len(invoice.lines[0].transaction_ids) == 2


def test_ties_rounded_half_even_cancel_across_lines() -> None:
    """2.5 cents public (owes 2) and 1.5 cents spot (owes 2): 4 owed on 4.0 exact, so
    nothing to post as rounding (half-up would bill 5 and post +1)."""
    # spot gpu/any is 0.90 USD per GPU-hour: 60 seconds are 1.5 cents
    txns = [*_charges(37.5), *_charges(60, mode="spot", occupancy_id="occ-2")]
    invoice = build_invoice("ws-a", "2026-01", txns, ISSUED)
    assert _line_amounts(invoice) == [
        ("public", Decimal("2.5"), 2),
        ("spot", Decimal("1.5"), 2),
    ]
    assert invoice.total_minor == 4
    assert invoice.rounding_transaction_id is None
    assert invoice_rounding(invoice) is None
