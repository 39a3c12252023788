"""Applying a quota tree names the principal it is given, whoever runs the process."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from dlc_ledger.services.quotas import apply_quota_file
from ledger.store.postgres import PostgresEventStore

TREE = """
quotas:
  - name: team
    min: {gpu/any: 2000}
    workspaces: [ws-team]
"""


def test_the_events_name_the_principal_passed(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("USER", "somebody-else")
    at = datetime(2026, 11, 1, tzinfo=UTC)
    result = apply_quota_file(store, TREE, principal="api/quota-service", at=at)
    assert result.lines and len(result.events) == len(result.lines)
    with store.engine.connect() as conn:
        sources = {s for (s,) in conn.execute(text("SELECT source FROM events"))}
    assert sources == {"api/quota-service"}
    again = apply_quota_file(store, TREE, principal="api/other", at=at)
    assert again.events == [] and again.lines == []
