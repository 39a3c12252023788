"""On a replayed slice of the openb trace, a rule applied afterwards with its effective
time at the replay's start is delivered exactly the matching events, once each, and none
of the others: checked against the store by an independent query."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text
from standardwebhooks.webhooks import Webhook

from dlc_ledger.services.clocks import observed_cluster_time
from dlc_ledger.services.notifications import apply_rules_file
from dlc_ledger.wiring.replay import load_replay_trace, run_replay
from ledger.store.postgres import PostgresEventStore
from tests.consumers.notifications.receiver import Receiver
from tests.consumers.notifications.test_delivery import SECRET, _until_idle
from tests.support.demo_files import DEMO_QUOTAS
from tests.support.grants import grant

SLICE = 300
EVENTS = ("JobStarted", "JobSucceeded", "JobFailed")


def test_every_matching_event_once_and_no_other(
    store: PostgresEventStore,
    bootstrap: str,
    tmp_path: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LS_HOOK", SECRET)
    summary = run_replay(
        "openb",
        "openb",
        store=store,
        bootstrap=bootstrap,
        data_dir=tmp_path,
        progress=None,
        limit=SLICE,
        quotas=DEMO_QUOTAS,
    )
    assert summary.ok
    epoch = load_replay_trace("openb", "openb", limit=SLICE).epoch
    rules = f"""
rules:
  - name: ls-jobs
    workspace: ws-ls
    events: [{", ".join(EVENTS)}]
    target: {{webhook: "{receiver.url}", secret_env: LS_HOOK}}
"""
    grant(store, "ws-ls", "LS_HOOK")
    apply_rules_file(store, rules, principal="test", at=epoch)  # after the replay, from its start
    now = observed_cluster_time(store)
    assert now is not None
    delivered = _until_idle(store, now)
    with store.engine.connect() as conn:
        expected = conn.execute(
            text(
                "SELECT e.event_id::text, e.type FROM events e JOIN events s "
                "ON s.stream = e.stream AND s.type = 'JobSubmitted' "
                "WHERE e.type = ANY(:types) AND s.data->>'workspace' = 'ws-ls'"
            ),
            {"types": list(EVENTS)},
        ).all()
    assert expected and delivered == len(expected)
    got: Counter[str] = Counter()
    ids: Counter[str] = Counter()
    for hit in receiver.received:
        message = Webhook(SECRET).verify(hit.body, hit.headers)
        # many due at once come as one summary (a storm), each listed with its id
        entries = (
            [(n["id"], n["data"]) for n in message["data"]["notifications"]]
            if message["type"] == "notifications.summary"
            else [(hit.headers["webhook-id"], message["data"])]
        )
        for nid, data in entries:
            assert data["workspace"] == "ws-ls"
            got[data["event"]] += 1
            ids[nid] += 1
    assert set(ids.values()) == {1}  # each notification once
    assert got == Counter(kind for _, kind in expected)
