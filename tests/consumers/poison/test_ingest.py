"""The Kafka ingest: already isolates poison (``consumers/ingest.py``); this proves it for
values at the edges a tenant's cluster can send, on the real broker of ``tests/consumers/kafka``.

Poison: a fact that occurred in year 9999 (outside the facts' instants, ``OutOfBounds``)
and an occupancy asking for 2**70 mGPU (beyond 64 bits: not canonical). Each is dead-lettered with
its reason and offset, visible to ``dlc-ledger dead-letters list``, and the next good
message is stored. Nothing was changed for ingest: the test passes without issue 44's fix.
"""

from __future__ import annotations

import json
import uuid

import orjson

from consumers.ingest import run_ingest
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall
from tests.support.factories import occupancy_started
from tests.support.kafka import make_events, produce, stored_ids
from tests.support.letters import listed_letters


def test_extreme_values_are_dead_lettered_and_the_next_message_stored(
    store: PostgresEventStore, bootstrap: str, topic: str, cli: CliCall
) -> None:
    valid = make_events(3, streams=1)
    template = orjson.loads(valid[0].to_json())
    late = {**template, "event_id": str(uuid.uuid4()), "occurred_at": "9999-12-31T23:59:59Z"}
    occupancy = orjson.loads(occupancy_started(1).to_json())
    huge = {**occupancy, "data": {**occupancy["data"], "mgpu": 2**70}}
    key = b"job-0"
    messages = [
        (key, valid[0].to_json()),
        (key, orjson.dumps(late)),
        (key, valid[1].to_json()),
        (key, json.dumps(huge).encode()),  # orjson refuses it too
        (key, valid[2].to_json()),
    ]
    produce(bootstrap, topic, messages)
    stats = run_ingest(
        store,
        bootstrap,
        topic,
        f"g-{uuid.uuid4().hex[:8]}",
        max_messages=len(messages),
        idle_timeout=30,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
    )
    assert stats.messages == len(messages)
    assert sorted(stored_ids(store)) == sorted(e.event_id for e in valid)
    letters = listed_letters(cli)
    assert [(r["source"], r["where"].rsplit("@", 1)[1]) for r in letters] == [  # type: ignore[union-attr]
        (f"kafka:{topic}", "1"),
        (f"kafka:{topic}", "3"),
    ]
    assert "9999" in str(letters[0]["error"])
