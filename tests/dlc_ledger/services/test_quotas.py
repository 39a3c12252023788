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


POOL = """
quotas:
  - name: pool
    min: {gpu/any: 8000}
  - name: team
    parent: pool
    min: {gpu/any: 2000}
    workspaces: [ws-team]
"""


def test_a_quota_added_keeps_the_tree_as_applied_and_binds_its_workspaces(
    store: PostgresEventStore,
) -> None:
    from dlc_ledger.services.quotas import add_quota, current_tree, draw_on_groups
    from ledger.errors import Invalid
    from ledger.events import QuotaSpec
    from ledger.quotas import QuotaTreeError

    at = datetime(2026, 11, 1, tzinfo=UTC)
    apply_quota_file(store, POOL, principal="test", at=at)
    # a change no file states: the pool draws on a group (force: nothing is subscribed)
    draw_on_groups(store, {"pool": ["gpu-g2"]}, principal="test", at=at, force=True)
    later = datetime(2026, 11, 2, tzinfo=UTC)
    spec = QuotaSpec(quota_id="infer", parent="pool", min={"gpu/any": 4000})
    added = add_quota(store, spec, ["app_1"], principal="test", at=later)
    assert len(added.events) == 2  # the quota, the binding
    tree = current_tree(store)
    assert tree.specs["pool"].resource_groups == ("gpu-g2",)  # kept, not dropped
    assert tree.bindings == {"ws-team": "team", "app_1": "infer"}
    with pytest.raises(Invalid, match="exists already"):
        add_quota(store, spec, principal="test", at=later)
    too_big = QuotaSpec(quota_id="big", parent="pool", min={"gpu/any": 4000})
    with pytest.raises(QuotaTreeError, match="add up to"):
        add_quota(store, too_big, principal="test", at=later)
