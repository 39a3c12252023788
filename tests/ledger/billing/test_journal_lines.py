"""``ledger.journal.minor_lines``: whole minor units that balance every transaction and stay
within two minor units of each account's precise movement, whatever the postings."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.journal import JournalLeg, minor_lines
from ledger.money import PRECISE_DIGITS

UNIT = 10**PRECISE_DIGITS
ACCOUNTS = ("receivable/ws-a", "receivable/ws-b", "revenue/public/gpu", "revenue/rounding")


@st.composite
def transactions(draw: st.DrawFn) -> list[list[JournalLeg]]:
    """Balanced transactions of two to four legs, in one or two currencies, each amount a
    few cents at sub-minor precision (some tiny, as an hourly accrual of an idle job)."""
    out = []
    for _ in range(draw(st.integers(1, 40))):
        legs = []
        for currency in draw(st.sampled_from([("USD",), ("EUR",), ("USD", "EUR")])):
            amounts = draw(
                st.lists(
                    st.one_of(
                        st.integers(-UNIT, UNIT),
                        st.integers(-500 * UNIT, 500 * UNIT),
                        st.integers(-500, 500).map(lambda cents: cents * UNIT),  # whole
                    ),
                    min_size=1,
                    max_size=3,
                )
            )
            accounts = draw(st.lists(st.sampled_from(ACCOUNTS), min_size=len(amounts) + 1,
                                     max_size=len(amounts) + 1))  # fmt: skip
            for account, amount in zip(accounts, [*amounts, -sum(amounts)], strict=True):
                legs.append(JournalLeg(account, currency, amount))
        out.append(legs)
    return out


@settings(max_examples=300, deadline=None)
@given(
    transactions(),
    st.dictionaries(
        st.tuples(st.sampled_from(ACCOUNTS), st.sampled_from(["USD", "EUR"])),
        st.one_of(
            st.integers(-1000 * UNIT, 1000 * UNIT),
            st.integers(-1000, 1000).map(lambda cents: cents * UNIT),
        ),
    ),
)
def test_every_entry_balances_and_no_account_drifts(
    txns: list[list[JournalLeg]], opening: dict[tuple[str, str], int]
) -> None:
    whole = minor_lines(txns, opening)
    precise: dict[tuple[str, str], int] = {}
    exported: dict[tuple[str, str], int] = {}
    for legs, amounts in zip(txns, whole, strict=True):
        assert len(amounts) == len(legs)
        for currency in {leg.currency for leg in legs}:
            assert (
                sum(a for a, leg in zip(amounts, legs, strict=True) if leg.currency == currency)
                == 0
            )
        for leg, amount in zip(legs, amounts, strict=True):
            key = (leg.account, leg.currency)
            precise[key] = precise.get(key, 0) + leg.precise
            exported[key] = exported.get(key, 0) + amount
            # never more than a unit and a half away from the posting itself
            assert abs(amount * UNIT - leg.precise) < 3 * UNIT
        for key, total in precise.items():
            # the roundings never pile up: under two minor units off the precise movement
            assert abs(exported[key] * UNIT - total) < 2 * UNIT, key
        once = [leg for leg in legs if sum(o.account == leg.account for o in legs) == 1]
        for leg in once:
            key = (leg.account, leg.currency)
            balance = opening.get(key, 0) + precise[key]
            if balance % UNIT == 0:  # whole (a receivable once its invoice is rounded): exact
                shown = round(Fraction(opening.get(key, 0), UNIT)) + exported[key]
                assert shown * UNIT == balance, key


def test_whole_postings_are_exported_as_they_are() -> None:
    legs = [
        JournalLeg("receivable/ws-a", "USD", 1250 * UNIT),
        JournalLeg("revenue/x", "USD", -1250 * UNIT),
    ]
    assert minor_lines([legs]) == [[1250, -1250]]


def test_sub_cent_accruals_add_up_instead_of_rounding_away() -> None:
    # 720 hourly accruals of 0.4 of a cent: 2.88 USD, not 0.00
    hour = [
        JournalLeg("receivable/ws-a", "USD", 4 * UNIT // 10),
        JournalLeg("revenue/x", "USD", -4 * UNIT // 10),
    ]
    whole = minor_lines([hour] * 720)
    assert sum(w[0] for w in whole) == 288 and all(w[0] == -w[1] for w in whole)
