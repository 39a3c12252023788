"""The CSV formula rule shared by the CLI and the API: text that a spreadsheet would run
as a formula gets a leading ``'``; numbers, decimal strings included, stay numbers."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dlc_ledger.cli.tables import render_rows
from dlc_ledger.presenters import neutralized


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("--", "'--"),
        ("=A", "'=A"),
        ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"),
        # numbers are not formulas: they keep their sign and stay numbers
        ("-12", "-12"),
        ("+12", "+12"),
        ("-240.5", "-240.5"),
        ("-1.5E+3", "-1.5E+3"),
        ("-.5", "-.5"),
        # a lone character cannot be a formula: "-" is the reports' "no quota"
        ("-", "-"),
        ("=", "="),
        # nothing to do
        ("train-a-1", "train-a-1"),
        ("a=b", "a=b"),
        (" =1", " =1"),
        ("", ""),
    ],
)
def test_a_cell_that_could_start_a_formula_is_prefixed(text: str, cell: str) -> None:
    assert neutralized(text) == cell


def test_the_cli_csv_applies_it_to_text_and_leaves_numbers() -> None:
    rows = [
        {"name": "=1+1", "user": "@me", "delta": -12, "amount": Decimal("-2.40"), "ok": True},
        {"name": "-x", "user": "bob", "delta": 3, "amount": Decimal("1"), "ok": False},
    ]
    lines = render_rows(rows, "csv").splitlines()
    assert lines == [
        "name,user,delta,amount,ok",
        "'=1+1,'@me,-12,-2.40,True",
        "'-x,bob,3,1,False",
    ]
