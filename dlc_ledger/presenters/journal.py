"""The journal export's two renderings, one for the CLI and the API both: CSV (one line a
posting, the header :data:`projections.billing.journal.JOURNAL_COLUMNS`) and a JSON
document (the lines, and per currency and per account the totals to reconcile them by)."""

from __future__ import annotations

import csv
import io
from typing import Any

from dlc_ledger.presenters.csv_cells import neutralized
from projections.billing import JOURNAL_COLUMNS, Journal, period_bounds

__all__ = ["journal_csv", "journal_document"]


def _cell(key: str, value: Any) -> Any:
    if value is None:
        return ""
    if key == "cause_event_ids":
        return " ".join(value)  # ids hold no space: one cell, split on spaces
    return neutralized(value) if isinstance(value, str) else value


def journal_csv(journal: Journal) -> str:
    """The lines as CSV: a header, then one row per posting; an empty amount is ``""``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(JOURNAL_COLUMNS)
    for line in journal.lines:
        writer.writerow([_cell(key, line[key]) for key in JOURNAL_COLUMNS])
    return out.getvalue()


def journal_document(journal: Journal) -> dict[str, Any]:
    """The JSON document: ``period``, its ``from`` / ``to`` instants, ``lines`` (an empty
    side is ``null``), ``totals`` per currency and ``accounts`` (each one's debit, credit
    and precise movement: the trial balance's)."""
    start, end = period_bounds(journal.period)
    return {
        "period": journal.period,
        "from": start.isoformat().replace("+00:00", "Z"),
        "to": end.isoformat().replace("+00:00", "Z"),
        "lines": journal.lines,
        "totals": journal.totals,
        "accounts": journal.accounts,
    }
