"""The broker cut under a running ingest consumer (what the chaos replay found): the consumer
rides it out and goes on from where it stood; nothing lost or doubled.

Before the fix a broker disconnect while the consumer looked for its group coordinator
raised ``KafkaConnectionError`` out of ``poll`` and ended ``dlc-ledger ingest`` with
"internal error … (a bug)": a supervisor restarted it, but a transient outage is no bug,
and a crash loop's growing back-off delays every fact after it."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from chaos.broker import ProxiedBroker
from consumers.ingest import IngestConsumer, IngestStats
from consumers.topics import ensure_topic
from ledger.store.postgres import PostgresEventStore
from tests.support.kafka import make_events, produce, stored_ids, streams_in_order

N = 6_000


def test_ingest_survives_broker_cuts_and_stores_everything_once(
    store: PostgresEventStore, database_url: str, tmp_path: Path
) -> None:
    topic = f"cut-{uuid.uuid4().hex[:8]}"
    broker = ProxiedBroker(tmp_path / "tansu.log", topic, 4).start()
    assert broker.proxy is not None
    consumer_store = PostgresEventStore(database_url)
    consumer = None
    stop = threading.Event()
    result: list[IngestStats] = []
    failure: list[BaseException] = []

    def run() -> None:
        assert consumer is not None
        try:
            result.append(consumer.run(stop))
        except BaseException as exc:  # what the test is about: it must not end the loop
            failure.append(exc)

    try:
        ensure_topic(broker.bootstrap, topic, partitions=4)
        events = make_events(N, streams=100)
        produce(broker.bootstrap, topic, events[: N // 2])
        consumer = IngestConsumer(
            consumer_store, broker.bootstrap, topic=topic, group=f"g-{uuid.uuid4().hex[:8]}",
            session_timeout_ms=2000, heartbeat_interval_ms=300, max_poll_records=200,
            backoff_initial=0.1, backoff_max=0.5,
        )  # fmt: skip
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 180
        while store.head_position() < N // 8:
            assert time.monotonic() < deadline and not failure, failure
            time.sleep(0.01)
        # cut mid-consumption, while it heartbeats and while it fetches: three times, and
        # on until a cut reached poll (the client absorbs some of them by itself)
        cuts = 0
        while cuts < 3 or (consumer.stats.broker_failures == 0 and cuts < 10):
            broker.proxy.cut()
            time.sleep(1.5)
            broker.proxy.restore()
            time.sleep(0.5)
            cuts += 1
        produce(broker.bootstrap, topic, events[N // 2 :])
        while store.head_position() < N:
            assert time.monotonic() < deadline, (
                f"stuck at {store.head_position()} after {cuts} cuts: {consumer.stats}"
            )
            assert not failure, failure
            time.sleep(0.05)
        assert thread.is_alive() and not failure, failure
    finally:
        stop.set()
        if consumer is not None:
            consumer.close()
        consumer_store.close()
        broker.stop()
    thread.join(30)
    assert not failure, failure
    # the cuts reached it, and it rode them out
    assert result and result[0].broker_failures >= 1, (cuts, result)
    ids = stored_ids(store)
    assert len(ids) == len(set(ids)) == N
    for sequence in streams_in_order(store).values():
        assert sequence == sorted(sequence)
