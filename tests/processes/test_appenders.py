"""Read models only read; every appender is on the map (issue 45, part 1)."""

from __future__ import annotations

from tests.processes.appenders import ROOT, appender_map, render


def test_no_read_model_appends() -> None:
    assert [m for m in appender_map() if m.startswith("projections/")] == []


def test_the_map_of_appenders_is_the_code_s() -> None:
    committed = (ROOT / "docs" / "appenders.md").read_text(encoding="utf-8")
    assert committed == render(appender_map()), (
        "a module appends that docs/appenders.md does not list (or no longer appends): "
        "python -m tests.processes.appenders > docs/appenders.md, and check it belongs there"
    )


def test_the_map_sees_an_appender() -> None:
    """The detector is not blind: the billing rater appends its postings."""
    mapping = appender_map()
    assert "LedgerTransactionPosted" in mapping["processes/billing/rater.py"]
    assert "consumers/ingest.py" in mapping
