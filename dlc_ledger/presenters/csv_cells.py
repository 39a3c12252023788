"""The one rule for what a CSV cell may start with, shared by the CLI's ``--format csv``
and the API's CSV responses (OWASP "CSV injection").

Job names, users and reasons come from events, and events from pod annotations anyone
with a namespace can write. A spreadsheet opening the file runs a cell that starts with
``=``, ``+``, ``-`` or ``@`` as a formula (tab and CR are read past first by some), so
such a cell gets a leading ``'``: shown as text, never evaluated. Left alone, since
neither can be a formula: a number — an int, a Decimal, or a decimal string such as
``-12`` or ``-240.5`` (the API writes decimals as strings), which ``'-12`` would stop
being — and a lone character, such as the ``-`` that names "no quota" in the reports.
"""

from __future__ import annotations

import re

__all__ = ["FORMULA_STARTS", "neutralized"]

#: characters a spreadsheet may take as the start of a formula (OWASP)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralized(text: str) -> str:
    """``text`` as a CSV cell: ``'`` prefixed when it could start a formula, unless it
    is a plain decimal number or a lone character."""
    if len(text) > 1 and text.startswith(FORMULA_STARTS) and _NUMBER.fullmatch(text) is None:
        return "'" + text
    return text
