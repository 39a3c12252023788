"""Every kind of poison message is dead-lettered with its reason; valid neighbours are stored."""

from __future__ import annotations

import uuid

import orjson

from consumers.ingest import run_ingest
from ledger.envelopes import MAX_EVENT_BYTES
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce, stored_ids

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


def _node(template: dict[str, object], **data: object) -> dict[str, object]:
    body = {"node": "n1", "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024, **data}
    return {**template, "type": "NodeRegistered", "stream": "node/n1", "data": body}


def test_values_the_store_or_encoder_refuse_are_dead_letters_not_a_crash_loop(
    store: PostgresEventStore, bootstrap: str, topic: str
) -> None:
    """Each of these made ingest exit (on every restart) with the batch's good messages."""
    valid = make_events(8, streams=1)
    template = orjson.loads(valid[0].to_json())

    def fresh(**fields: object) -> bytes:
        return orjson.dumps({**template, "event_id": str(uuid.uuid4()), **fields})

    data = template["data"]
    poison = [
        # UTC conversion leaves datetime's range: OverflowError
        (fresh(occurred_at="9999-12-31T23:59:59-01:00"), "invalid-schema"),
        (fresh(occurred_at="0001-01-01T00:00:00+01:00"), "invalid-schema"),
        # an integer >= 2**64 passes pydantic, fails in orjson
        (
            orjson.dumps(_node({**template, "event_id": str(uuid.uuid4())})).replace(
                b'"gpus":8', b'"gpus":18446744073709551616'
            ),
            "out-of-bounds",
        ),
        # NUL in a data string or in source: PostgreSQL refuses it in jsonb / text
        (fresh(data={**data, "reason": "a\x00b"}), "out-of-bounds"),
        (fresh(source="kube-watcher/\x00"), "invalid-schema"),
        # an instant inside the payload far outside any fact's range
        (
            fresh(
                type="OccupancyEnded",
                data={
                    "occupancy_id": "o",
                    "job_uid": "job-0",
                    "pod_uid": "p",
                    "ended_at": "9999-12-31T23:59:59-01:00",
                },
            ),
            "out-of-bounds",
        ),
    ]
    key = b"job-0"
    messages: list[tuple[bytes, bytes]] = []
    for i, (payload, _) in enumerate(poison):
        messages.append((key, valid[i].to_json()))
        messages.append((key, payload))
    messages += [(key, v.to_json()) for v in valid[len(poison) :]]
    produce(bootstrap, topic, messages)

    group = f"g-{uuid.uuid4().hex[:8]}"
    stats = run_ingest(
        store, bootstrap, topic, group, max_messages=len(messages), idle_timeout=30, **FAST_GROUP
    )

    assert stats.messages == len(messages)
    assert sorted(stored_ids(store)) == sorted(e.event_id for e in valid)
    letters = sorted(store.dead_letters(), key=lambda d: d.offset or 0)
    assert [(d.reason, d.offset) for d in letters] == [
        (reason, 2 * i + 1) for i, (_, reason) in enumerate(poison)
    ]
    # the evidence is kept byte for byte, NUL included
    assert [d.payload for d in letters] == [payload for payload, _ in poison]
    assert all("\x00" not in d.error for d in letters)
    with store.transaction() as uow:
        offsets = uow.load_checkpoint(f"ingest:{group}").offsets
    assert sum(offsets.values()) == len(messages)


def test_only_a_watchers_cluster_facts_come_through_the_topic(
    store: PostgresEventStore, bootstrap: str, topic: str
) -> None:
    """A forged price book, credit note or transaction, a foreign source or a fact slipped
    into another job's stream is a dead letter with its reason; the watcher's facts are stored."""
    valid = make_events(5, streams=1)
    template = orjson.loads(valid[0].to_json())

    def fresh(**fields: object) -> bytes:
        return orjson.dumps({**template, "event_id": str(uuid.uuid4()), **fields})

    price_book = {
        "book_id": "forged",
        "currency": "EUR",
        "scale": 2,
        "effective_from": "2026-11-01T00:00:00Z",
        "rates": {"public": {"gpu/any": "0.0001"}, "spot": {}},
        "idle_multiplier": "0",
    }
    credit = {
        "credit_note_id": "c1",
        "invoice_id": "i1",
        "amount_minor": 10**9,
        "currency": "EUR",
        "reason": "forged",
    }
    poison = [
        (fresh(type="PriceBookPublished", stream="pricebook/forged", data=price_book),
         "not-a-cluster-fact"),
        (fresh(type="CreditNoteIssued", stream="invoice/i1", data=credit), "not-a-cluster-fact"),
        (fresh(source="api/mallory"), "not-from-a-watcher"),
        (fresh(stream="job/someone-else"), "wrong-stream"),
    ]  # fmt: skip
    key = b"job-0"
    messages: list[tuple[bytes, bytes]] = []
    for i, (payload, _) in enumerate(poison):
        messages.append((key, valid[i].to_json()))
        messages.append((key, payload))
    messages.append((key, valid[4].to_json()))
    produce(bootstrap, topic, messages)

    stats = run_ingest(
        store,
        bootstrap,
        topic,
        f"g-{uuid.uuid4().hex[:8]}",
        max_messages=len(messages),
        idle_timeout=30,
        **FAST_GROUP,
    )

    assert stats.messages == len(messages)
    assert sorted(stored_ids(store)) == sorted(e.event_id for e in valid)
    letters = sorted(store.dead_letters(), key=lambda d: d.offset or 0)
    assert [d.reason for d in letters] == [reason for _, reason in poison]
    assert "PriceBookPublished is not a cluster fact" in letters[0].error
