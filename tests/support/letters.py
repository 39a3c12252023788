"""Poison tests (issue 44): one bad item never stops a long-running part.

Each test feeds its process a poison through the real path, sees the item quarantined as a
dead letter (``dlc-ledger dead-letters list``) and sees the process go on with the next
good item. The fixtures are the suite's own (``tests/conftest.py``: a migrated PostgreSQL
clone per test, the in-process CLI on it).
"""

from __future__ import annotations

import json

from tests.support.clis import CliCall

__all__ = ["listed_letters"]


def listed_letters(cli: CliCall) -> list[dict[str, object]]:
    """The open dead letters, as ``dlc-ledger dead-letters list --json`` prints them."""
    rows: list[dict[str, object]] = json.loads(cli("dead-letters", "list", "--json"))
    return rows
