"""Every kind of poison message is dead-lettered with its reason; valid neighbours are stored."""

from __future__ import annotations

import uuid

import orjson

from consumers.ingest import run_ingest
from ledger.envelopes import MAX_EVENT_BYTES
from ledger.store.postgres import PostgresEventStore
from tests.kafka.helpers import make_events, produce, stored_ids

FAST_GROUP = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}


def test_each_kind_of_poison_is_dead_lettered_and_neighbours_stored(
    store: PostgresEventStore, bootstrap: str, topic: str
) -> None:
    valid = make_events(6, streams=1)
    template = orjson.loads(valid[0].to_json())
    unknown = {**template, "event_id": str(uuid.uuid4()), "type": "NoSuchEvent"}
    newer = {**template, "event_id": str(uuid.uuid4()), "schema_version": 99}
    wrong_schema = {**template, "event_id": "not-a-uuid"}
    oversized = {**template, "event_id": str(uuid.uuid4()), "source": "x" * (MAX_EVENT_BYTES + 10)}
    poison = [
        (b"{not json", "invalid-schema"),
        (orjson.dumps(wrong_schema), "invalid-schema"),
        (orjson.dumps(unknown), "unknown-type"),
        (orjson.dumps(newer), "newer-schema-version"),
        (orjson.dumps(oversized), "oversized"),
    ]
    key = b"job-0"  # one key, one partition: valid and poison interleave in one log
    messages: list[tuple[bytes, bytes]] = []
    for i, (payload, _) in enumerate(poison):
        messages.append((key, valid[i].to_json()))
        messages.append((key, payload))
    messages.append((key, valid[5].to_json()))
    produce(bootstrap, topic, messages)

    group = f"g-{uuid.uuid4().hex[:8]}"
    stats = run_ingest(
        store,
        bootstrap,
        topic,
        group,
        max_messages=len(messages),
        idle_timeout=30,
        **FAST_GROUP,
    )

    assert stats.messages == len(messages)
    assert sorted(stored_ids(store)) == sorted(e.event_id for e in valid)
    letters = sorted(store.dead_letters(), key=lambda d: d.offset or 0)
    assert [d.reason for d in letters] == [reason for _, reason in poison]
    assert [d.offset for d in letters] == [1, 3, 5, 7, 9]
    assert all(d.topic == topic and d.partition is not None for d in letters)
    assert letters[0].payload == b"{not json"
    # the batch advanced past the poison: the checkpoint holds the end of the log
    with store.transaction() as uow:
        offsets = uow.load_checkpoint(f"ingest:{group}").offsets
    assert sum(offsets.values()) == len(messages)
