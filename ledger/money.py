"""Money arithmetic: exact decimals in, integer minor units out, rounded once.

Bills must add up to the cent and reproduce byte for byte on replay, so money is
never a float here. Rates and intermediate amounts are ``Decimal`` (or exact
``Fraction`` where a division by 3600 would otherwise repeat forever); what the
ledger stores is an ``int`` of minor units at a per-currency ``scale`` (cents:
scale 2). The one rounding step, half-even ("banker's rounding", so ties do not
drift upward over millions of lines), lives in :func:`to_minor`.

Rated amounts, accruals and postings are carried *below* the minor unit, at
:data:`PRECISE_DIGITS` decimals of it (``precise`` integers here, decimal strings in
events and ``numeric`` in tables, like Lago's ``precise_amount_cents``): a job that
costs a third of a cent still adds a third of a cent. Money becomes whole minor
units once, where it is owed: an invoice line rounds its precise sum
(:func:`round_precise`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)
from fractions import Fraction

from ledger.errors import Invalid

__all__ = [
    "DECIMAL_PRECISION",
    "MAX_SCALE",
    "MONEY_CONTEXT",
    "PRECISE_DIGITS",
    "default_scale",
    "exact_context",
    "format_minor",
    "from_minor",
    "parse_decimal",
    "plain_decimal",
    "precise_decimal",
    "precise_from_decimal",
    "round_precise",
    "to_decimal",
    "to_minor",
    "to_precise",
    "validate_scale",
]

#: Significant digits of every intermediate Decimal: far beyond any bill
#: (1e12 currency units still leaves 28 fractional digits).
DECIMAL_PRECISION = 40

#: Largest supported scale (minor-unit exponent); 6 covers every ISO 4217 currency and micro-units.
MAX_SCALE = 6

MONEY_CONTEXT = Context(
    prec=DECIMAL_PRECISION,
    rounding=ROUND_HALF_EVEN,
    traps=[InvalidOperation, DivisionByZero, Overflow],
)

# ISO 4217 minor-unit exponents that differ from the common 2.
_ISO_EXPONENTS: dict[str, int] = {
    "BHD": 3, "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "IQD": 3, "ISK": 0, "JOD": 3,
    "JPY": 0, "KMF": 0, "KRW": 0, "KWD": 3, "LYD": 3, "OMR": 3, "PYG": 0, "RWF": 0,
    "TND": 3, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
}  # fmt: skip


@contextmanager
def exact_context() -> Iterator[Context]:
    """A local Decimal context with :data:`DECIMAL_PRECISION` digits, half-even, strict traps.

    Used around every money computation so the caller's (thread-global) context
    can neither truncate nor round an intermediate value.
    """
    with localcontext(MONEY_CONTEXT) as ctx:
        yield ctx


def default_scale(currency: str) -> int:
    """The ISO 4217 minor-unit exponent of ``currency`` (2 unless known otherwise)."""
    return _ISO_EXPONENTS.get(currency.upper(), 2)


def validate_scale(scale: int) -> int:
    """``scale`` itself if it is an int in 0..:data:`MAX_SCALE`, else ``ValueError``."""
    if isinstance(scale, bool) or not isinstance(scale, int) or not 0 <= scale <= MAX_SCALE:
        raise Invalid(f"scale must be an integer in 0..{MAX_SCALE}, got {scale!r}")
    return scale


def parse_decimal(text: str, *, what: str = "value") -> Decimal:
    """Parse a plain, finite decimal string (``"2.40"``); exponents and floats are refused."""
    if not isinstance(text, str):
        raise Invalid(f"{what} must be a decimal string, got {type(text).__name__}")
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise Invalid(f"{what} {text!r} is not a decimal number") from None
    if not value.is_finite():
        raise Invalid(f"{what} {text!r} is not finite")
    return value


def to_minor(amount: Decimal | Fraction | int, scale: int) -> int:
    """``amount`` in integer minor units at ``scale``, rounded half-even exactly once.

    The conversion goes through :class:`~fractions.Fraction`, which is exact for
    any finite Decimal, so there is no intermediate rounding at all: 0.125 at
    scale 2 is 12, 0.135 is 14, 0.1250000001 is 13.
    """
    validate_scale(scale)
    if isinstance(amount, Decimal) and not amount.is_finite():
        raise Invalid(f"amount {amount!r} is not finite")
    exact = Fraction(amount) * 10**scale
    rounded: int = round(exact)  # Fraction.__round__ without ndigits rounds half to even
    return rounded


#: Decimals of a minor unit that rated amounts and postings carry (10**-9 of a cent).
#: Each rated line key is rounded to this once (half-even), so a million of them
#: are off by at most 0.0005 of a minor unit in all.
PRECISE_DIGITS = 9
_PRECISE = 10**PRECISE_DIGITS


def to_precise(amount: Decimal | Fraction | int, scale: int) -> int:
    """``amount`` (currency units) in integer 10**-:data:`PRECISE_DIGITS` minor units, half-even."""
    validate_scale(scale)
    if isinstance(amount, Decimal) and not amount.is_finite():
        raise Invalid(f"amount {amount!r} is not finite")
    rounded: int = round(Fraction(amount) * 10**scale * _PRECISE)
    return rounded


def precise_decimal(precise: int) -> Decimal:
    """A precise integer as a Decimal of minor units (``1_500_000_000`` -> ``1.500000000``)."""
    return Decimal(precise).scaleb(-PRECISE_DIGITS, MONEY_CONTEXT)


def precise_from_decimal(value: Decimal | int | str) -> int:
    """Minor units (int, Decimal or decimal string, as stored) as a precise integer.

    Refuses a value with more than :data:`PRECISE_DIGITS` decimals (it would be
    silently rounded otherwise).
    """
    d = Decimal(value) if not isinstance(value, Decimal) else value
    if not d.is_finite():
        raise Invalid(f"amount {value!r} is not finite")
    exact = Fraction(d) * _PRECISE
    if exact.denominator != 1:
        raise Invalid(f"amount {value!r} has more than {PRECISE_DIGITS} decimals of a minor unit")
    return int(exact)


def round_precise(precise: int) -> int:
    """Whole minor units of a precise amount, rounded half-even: where money becomes owed."""
    rounded: int = round(Fraction(precise, _PRECISE))
    return rounded


def plain_decimal(value: Decimal) -> str:
    """Fixed-point text without trailing zeros or exponent (``6260.400000000`` -> ``6260.4``)."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def from_minor(minor: int, scale: int) -> Decimal:
    """The exact Decimal value of ``minor`` units at ``scale`` (12345, 2 -> 123.45)."""
    validate_scale(scale)
    return Decimal(minor).scaleb(-scale, MONEY_CONTEXT)


def to_decimal(value: Fraction) -> Decimal:
    """A Decimal rendering of an exact fraction, to :data:`DECIMAL_PRECISION` digits.

    Exact whenever the fraction has a finite decimal expansion within that
    precision (1/8 -> 0.125); otherwise the nearest 40-digit value (1/3600).
    """
    with exact_context():
        return Decimal(value.numerator) / Decimal(value.denominator)


def format_minor(minor: int, scale: int, currency: str, *, grouped: bool = False) -> str:
    """Display form of an amount: ``format_minor(12345, 2, "USD") == "123.45 USD"``.

    ``grouped`` separates thousands for people (``1,234.50 USD``); machine formats
    (CSV, JSON) keep integer minor units instead.
    """
    validate_scale(scale)
    sign = "-" if minor < 0 else ""
    units, frac = divmod(abs(minor), 10**scale)
    whole = f"{units:,}" if grouped else f"{units}"
    text = f"{sign}{whole}" if scale == 0 else f"{sign}{whole}.{frac:0{scale}d}"
    return f"{text} {currency}"
