"""A general ledger's lines from the ledger's postings: whole minor units that still balance.

The ledger posts below the minor unit (rating carries fractions of a cent; an invoice rounds
once, with a rounding posting: DESIGN.md section 5). A general ledger takes whole minor
units, and every journal entry it imports must balance. Rounding each posting on its own
would break both: a transaction's legs could stop summing to zero, and an account fed by
thousands of sub-cent accruals would drift from the ledger by the sum of their roundings.

:func:`minor_lines` rounds with a carry per account: a posting's whole amount is what brings
the account's exported running total to its precise running total rounded half-even, so
the roundings never accumulate; when a transaction's whole legs do not sum to zero, the
legs whose carried rounding was the largest in that direction take one minor unit each
(the largest-remainder rule), so every entry balances. Hence, per account and currency, the
exported total over a run of transactions differs from the precise movement by less than
two minor units (one at each end), and by nothing when both ends are whole: a leg whose
account's precise total is whole after it is never the one adjusted (the legs' carried
roundings sum to the entry's imbalance, so enough others lean the needed way), so an
account whose balance is whole (a receivable once its invoice's rounding is booked) is
exported exactly to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ledger.money import PRECISE_DIGITS

__all__ = ["JournalLeg", "minor_lines"]

_PRECISE = 10**PRECISE_DIGITS


@dataclass(frozen=True)
class JournalLeg:
    """One posting: its account and currency, its signed amount in precise minor units
    (:mod:`ledger.money`: ``10**PRECISE_DIGITS`` of them to a minor unit; debit positive)."""

    account: str
    currency: str
    precise: int


def _half_even(precise: int) -> int:
    rounded: int = round(Fraction(precise, _PRECISE))
    return rounded


def minor_lines(
    transactions: Iterable[Sequence[JournalLeg]],
    opening: Mapping[tuple[str, str], int] | None = None,
) -> list[list[int]]:
    """The whole minor units of each leg of each transaction, in order (see the module
    docstring). ``opening``: each (account, currency)'s precise balance before the first
    transaction (its exported balance is taken as that rounded half-even), so consecutive
    periods carry on from one another. Each transaction must balance per currency."""
    precise_total: dict[tuple[str, str], int] = dict(opening or {})
    exported: dict[tuple[str, str], int] = {k: _half_even(v) for k, v in precise_total.items()}
    out: list[list[int]] = []
    for legs in transactions:
        whole: list[int] = []
        # the carried rounding of each leg (precise minus whole, in precise units)
        residual: list[int] = []
        # running totals as this transaction moves them (an account may have two legs)
        running_precise: dict[tuple[str, str], int] = {}
        running_exported: dict[tuple[str, str], int] = {}
        for leg in legs:
            key = (leg.account, leg.currency)
            before_p = running_precise.get(key, precise_total.get(key, 0))
            before_e = running_exported.get(key, exported.get(key, 0))
            after_p = before_p + leg.precise
            amount = _half_even(after_p) - before_e
            whole.append(amount)
            residual.append(after_p - (before_e + amount) * _PRECISE)
            running_precise[key] = after_p
            running_exported[key] = before_e + amount
        for currency in {leg.currency for leg in legs}:
            mine = [i for i, leg in enumerate(legs) if leg.currency == currency]
            off = sum(whole[i] for i in mine)
            if off == 0:
                continue
            step = -1 if off > 0 else 1
            # legs rounded furthest away from the needed direction take the unit first
            order = sorted(mine, key=lambda i: (step * -residual[i], i))
            for n in range(abs(off)):
                i = order[n % len(order)]
                whole[i] += step
                residual[i] -= step * _PRECISE
        for leg, amount in zip(legs, whole, strict=True):
            key = (leg.account, leg.currency)
            precise_total[key] = precise_total.get(key, 0) + leg.precise
            exported[key] = exported.get(key, 0) + amount
        out.append(whole)
    return out
