"""Broker unreachable at the producer: events spool durably and arrive in order once it is back."""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from consumers.producer import EventPublisher
from consumers.spool import SpoolFull
from dlc_ledger.wiring.broker import EmbeddedBroker, free_port
from tests.support.kafka import consume_all, make_events, sequence_of

# fail fast: a test should not wait Kafka's default two minutes to learn the broker is gone
QUICK = {
    "request_timeout_ms": 1_000,
    "delivery_timeout_ms": 2_000,
    "max_block_ms": 1_000,
    "bootstrap_timeout_ms": 1_000,
    "linger_ms": 0,
}


def per_key_sequences(values: list[bytes]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for value in values:
        wire = orjson.loads(value)
        out[wire["stream"]].append(int(wire["data"]["reason"]))
    return out


def test_closed_port_spools_survives_restart_and_drains_in_order(tmp_path: Path) -> None:
    port = free_port()
    topic = f"spool-{uuid.uuid4().hex[:8]}"
    events = make_events(400, streams=7)
    data_dir = tmp_path / "producer"

    publisher = EventPublisher(f"127.0.0.1:{port}", data_dir=data_dir, topic=topic, **QUICK)
    assert publisher.publish(events[:150]).spooled == 150
    assert publisher.publish(events[150:300]).spooled == 150  # in backoff: straight to the spool
    publisher.close()

    publisher = EventPublisher(f"127.0.0.1:{port}", data_dir=data_dir, topic=topic, **QUICK)
    assert publisher.pending == 300  # read back after the restart
    broker = EmbeddedBroker(tmp_path / "broker", port=port, topic=topic, partitions=4)
    broker.start()
    try:
        result = publisher.publish(events[300:])  # waits behind the spool
        assert (result.drained, result.sent, result.spooled) == (300, 100, 0)
        assert publisher.pending == 0
        publisher.close()
        values = consume_all(broker.bootstrap, topic, expected=400)
    finally:
        broker.stop()
    assert len(values) == 400
    assert {orjson.loads(v)["event_id"] for v in values} == {str(e.event_id) for e in events}
    for stream, sequence in per_key_sequences(values).items():
        assert sequence == sorted(sequence), stream


def test_broker_stopped_mid_stream_then_back(tmp_path: Path) -> None:
    topic = f"spool-{uuid.uuid4().hex[:8]}"
    events = make_events(300, streams=5)
    broker = EmbeddedBroker(tmp_path / "broker", topic=topic, partitions=4)
    status = broker.start()
    assert status.port is not None
    publisher = EventPublisher(broker.bootstrap, data_dir=tmp_path / "p", topic=topic, **QUICK)
    assert publisher.publish(events[:100]).sent == 100
    broker.stop()
    assert publisher.publish(events[100:200]).spooled == 100
    publisher.close()  # the producer process restarts while the broker is still down

    # a broker is back on the same address (Tansu keeps nothing: the first 100 are gone)
    broker = EmbeddedBroker(tmp_path / "broker", port=status.port, topic=topic, partitions=4)
    broker.start()
    try:
        publisher = EventPublisher(broker.bootstrap, data_dir=tmp_path / "p", topic=topic, **QUICK)
        assert publisher.pending == 100
        assert publisher.publish(events[200:]).drained == 100
        publisher.close()
        values = consume_all(broker.bootstrap, topic, expected=200)
    finally:
        broker.stop()
    got = sorted(sequence_of_value(v) for v in values)
    assert got == list(range(100, 300))
    for stream, sequence in per_key_sequences(values).items():
        assert sequence == sorted(sequence), stream


def sequence_of_value(value: bytes) -> int:
    return int(orjson.loads(value)["data"]["reason"])


def test_full_spool_raises_and_keeps_what_it_has(tmp_path: Path) -> None:
    publisher = EventPublisher(
        f"127.0.0.1:{free_port()}", data_dir=tmp_path, max_spool_records=150, **QUICK
    )
    events = make_events(200, streams=3)
    publisher.publish(events[:100])
    with pytest.raises(SpoolFull, match="full"):
        publisher.publish(events[100:])
    assert publisher.pending == 100
    assert [sequence_of(e) for e in events[:1]] == [0]
    publisher.close()
