"""A workspace token's quota subtree (projections/quotas/scope.py): its bound leaves and
each inner node made only of them; never a node with another team's (or nobody's) leaf."""

from __future__ import annotations

from sqlalchemy import text

from dlc_ledger.services.quotas import apply_quota_file
from ledger.store.postgres import PostgresEventStore
from projections.quotas.scope import quota_in_scope, quota_subtree, subtree_condition
from tests.support.builders import EPOCH

TREE = """
quotas:
  - name: org
    min: {gpu/any: 16000}
  - name: research
    parent: org
    min: {gpu/any: 8000}
  - name: vision
    parent: research
    min: {gpu/any: 4000}
    workspaces: [ws-vision]
  - name: speech
    parent: research
    min: {gpu/any: 4000}
    workspaces: [ws-speech]
  - name: prod
    parent: org
    min: {gpu/any: 8000}
  - name: serving
    parent: prod
    min: {gpu/any: 4000}
    workspaces: [ws-serving]
  - name: spare
    parent: prod
    min: {gpu/any: 4000}
"""


def test_the_subtree_is_the_nodes_made_only_of_the_tokens_leaves(
    store: PostgresEventStore,
) -> None:
    apply_quota_file(store, TREE, principal="api/test", at=EPOCH)
    with store.engine.connect() as conn:
        assert quota_subtree(conn, None) is None
        assert quota_subtree(conn, ["ws-vision"]) == {"vision"}
        # both of research's leaves: research too, not org (prod is someone else's)
        assert quota_subtree(conn, ["ws-vision", "ws-speech"]) == {"vision", "speech", "research"}
        # prod has a leaf bound to nobody: it is not serving's alone
        assert quota_subtree(conn, ["ws-serving"]) == {"serving"}
        every = ["ws-vision", "ws-speech", "ws-serving"]
        assert quota_subtree(conn, every) == {"vision", "speech", "research", "serving"}
        assert quota_subtree(conn, ["ws-unbound"]) == frozenset()
        assert quota_in_scope(conn, "research", ["ws-speech", "ws-vision"])
        assert not quota_in_scope(conn, "org", every)
        assert quota_in_scope(conn, "org", None)
        # as a condition inside another query's WHERE
        condition, params = subtree_condition("q", ["ws-vision", "ws-speech"])
        kept = conn.execute(
            text(f"SELECT q FROM unnest(CAST(:all AS text[])) AS q WHERE {condition} ORDER BY q"),
            {**params, "all": ["org", "research", "speech", "serving", "-"]},
        ).scalars()
        assert list(kept) == ["research", "speech"]
        assert subtree_condition("q", None) == ("TRUE", {})
