"""ledger/payments.py: a payment's split and transactions, pure (hypothesis): every
transaction balances, touches only cash, the receivable and the credit balance (never
revenue), and the split settles at most what is owed; amounts are exact at the scale."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.accounts import balances
from ledger.errors import Invalid
from ledger.payments import (
    InvoiceBalance,
    application_transaction,
    over_settlement_id,
    parse_amount,
    payment_transaction,
    return_transaction,
    split_payment,
)

ALLOWED = ("cash/USD", "receivable/ws-a", "credit/ws-a")


@given(amount=st.integers(1, 10**12), owed=st.integers(-(10**6), 10**12))
def test_a_payment_settles_at_most_what_is_owed_and_never_touches_revenue(
    amount: int, owed: int
) -> None:
    applied, excess = split_payment(amount, owed)
    assert applied + excess == amount and 0 <= applied <= max(owed, 0) and excess >= 0
    assert excess == 0 or applied == max(owed, 0)
    txn = payment_transaction("p", "i", "ws-a", "USD", applied, excess, reference="r")
    assert balances(txn.postings) == {"USD": Decimal(0)}
    assert {p.account for p in txn.postings} <= set(ALLOWED)
    assert txn.period is None  # on no usage invoice
    cash = [p for p in txn.postings if p.account == "cash/USD"]
    assert [p.amount_minor for p in cash] == [amount]


@given(amount=st.integers(1, 10**12))
def test_an_application_moves_credit_to_the_receivable_only(amount: int) -> None:
    txn = application_transaction(
        "a", "ws-a", "USD", amount, from_invoice_id="i1", to_invoice_id="i2"
    )
    assert balances(txn.postings) == {"USD": Decimal(0)}
    assert {p.account: p.amount_minor for p in txn.postings} == {
        "receivable/ws-a": -amount,
        "credit/ws-a": amount,
    }
    assert "i1" in txn.memo and "i2" in txn.memo


@given(amount=st.integers(1, 10**12))
def test_a_return_moves_the_receivable_to_the_credit_balance_only(amount: int) -> None:
    txn = return_transaction("s", "i1", "ws-a", "USD", amount)
    assert balances(txn.postings) == {"USD": Decimal(0)}
    assert {p.account: p.amount_minor for p in txn.postings} == {
        "receivable/ws-a": amount,
        "credit/ws-a": -amount,
    }
    with pytest.raises(Invalid):
        return_transaction("s", "i1", "ws-a", "USD", 0)


@given(
    total=st.integers(0, 10**9),
    credited=st.integers(0, 10**9),
    paid=st.integers(0, 10**9),
    applied=st.integers(0, 10**9),
)
def test_once_the_excess_is_returned_nothing_is_clipped(
    total: int, credited: int, paid: int, applied: int
) -> None:
    before = InvoiceBalance(total, credited, paid, applied)
    after = InvoiceBalance(total, credited, paid, applied, before.excess_minor)
    assert after.excess_minor == 0
    assert after.open_minor == total - after.settled_minor + before.excess_minor >= 0
    assert before.open_minor == after.open_minor  # the clip hid exactly the excess
    # the id names the invoice and what it had settled: a further settlement is another
    assert over_settlement_id("i1", 10) == over_settlement_id("i1", 10)
    assert over_settlement_id("i1", 10) != over_settlement_id("i1", 11)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0", "positive"),
        ("-1.00", "positive"),
        ("1.005", "more decimals than USD allows"),
        ("1e3", "not a plain decimal"),
        ("NaN", "not a plain decimal"),
        ("1" * 31, "not a plain decimal"),
        ("9" * 30, "beyond the largest amount"),
    ],
)
def test_bad_amounts_are_refused(text: str, words: str) -> None:
    with pytest.raises(Invalid, match=words):
        parse_amount(text, 2, "USD")


def test_amounts_are_exact_at_the_scale() -> None:
    assert parse_amount("1200.50", 2, "USD") == 120050
    assert parse_amount("7", 0, "JPY") == 7
