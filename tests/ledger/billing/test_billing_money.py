"""Minor units, half-even rounding exactly once, display."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.money import default_scale, format_minor, from_minor, parse_decimal, to_minor


@pytest.mark.parametrize(
    ("amount", "scale", "minor"),
    [
        ("0.125", 2, 12),
        ("0.135", 2, 14),
        ("0.145", 2, 14),
        ("0.155", 2, 16),
        ("-0.125", 2, -12),
        ("0.1250000000000000000001", 2, 13),
        ("2.5", 0, 2),
        ("3.5", 0, 4),
        ("123.45", 2, 12345),
        ("0.0005", 3, 0),
        ("0.0015", 3, 2),
        ("1.2345675", 6, 1234568),
    ],
)
def test_to_minor_rounds_half_even_once(amount: str, scale: int, minor: int) -> None:
    assert to_minor(Decimal(amount), scale) == minor


def test_to_minor_is_exact_on_fractions() -> None:
    # 1/8 is exactly a tie at scale 2; 1/3 is not.
    assert to_minor(Fraction(1, 8), 2) == 12
    assert to_minor(Fraction(3, 8), 2) == 38
    assert to_minor(Fraction(1, 3), 2) == 33


def test_to_minor_refuses_bad_scale_and_non_finite() -> None:
    with pytest.raises(ValueError, match="scale"):
        to_minor(Decimal("1"), 7)
    with pytest.raises(ValueError, match="finite"):
        to_minor(Decimal("NaN"), 2)


def test_format_minor() -> None:
    assert format_minor(12345, 2, "USD") == "123.45 USD"
    assert format_minor(5, 2, "USD") == "0.05 USD"
    assert format_minor(-5, 2, "EUR") == "-0.05 EUR"
    assert format_minor(-123456789, 2, "USD", grouped=True) == "-1,234,567.89 USD"
    assert format_minor(1234567, 0, "JPY", grouped=True) == "1,234,567 JPY"
    assert format_minor(7, 0, "JPY") == "7 JPY"
    assert format_minor(1, 3, "KWD") == "0.001 KWD"


def test_scales_and_parsing() -> None:
    assert default_scale("USD") == 2
    assert default_scale("JPY") == 0
    assert default_scale("KWD") == 3
    assert parse_decimal("2.40") == Decimal("2.40")
    with pytest.raises(ValueError, match="not a decimal"):
        parse_decimal("two")


@given(st.integers(min_value=-(10**15), max_value=10**15), st.integers(min_value=0, max_value=6))
def test_minor_round_trip(minor: int, scale: int) -> None:
    assert to_minor(from_minor(minor, scale), scale) == minor
    shown = format_minor(minor, scale, "USD").removesuffix(" USD")
    assert Decimal(shown) == from_minor(minor, scale)
