"""Contract tests every event store adapter must pass.

Subclass :class:`EventStoreContract` and provide a ``store`` fixture returning an
empty store; the tests here then run against that adapter unchanged.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from ledger.envelopes import Envelope
from ledger.store.base import ConcurrencyConflict, DuplicateEventConflict, EventStore
from tests.factories import EPOCH, job_succeeded, occupancy_started


class EventStoreContract:
    def test_append_then_read_stream(self, store: EventStore) -> None:
        first = occupancy_started(1, job="j1")
        second = job_succeeded(2, job="j1")
        result = store.append([first, second])
        assert result.positions == (1, 2)
        read = store.read_stream("job/j1")
        assert [r.envelope for r in read] == [first, second]
        assert [r.version for r in read] == [1, 2]
        assert store.stream_version("job/j1") == 2
        assert store.stream_version("job/none") == 0

    def test_recorded_events_carry_the_envelopes_fields_flat(self, store: EventStore) -> None:
        # projections read the flat fields; they must be the envelope's, every one
        event = occupancy_started(1, job="j1")
        store.append([event])
        (recorded,) = store.read_after(0)
        assert recorded._fields[3:] == tuple(Envelope.model_fields)
        assert recorded[3:] == tuple(getattr(event, name) for name in Envelope.model_fields)
        assert recorded.envelope == event

    def test_append_is_idempotent_by_event_id(self, store: EventStore) -> None:
        batch = [occupancy_started(n) for n in range(5)]
        store.append(batch)
        again = store.append(batch)
        assert again.positions == ()
        assert set(again.duplicates) == {e.event_id for e in batch}
        assert store.head_position() == 5

    def test_redelivery_with_new_observation_time_is_the_same_fact(self, store: EventStore) -> None:
        event = occupancy_started(1)
        store.append([event])
        later = event.model_copy(update={"observed_at": event.observed_at + timedelta(hours=1)})
        assert store.append([later]).positions == ()
        assert store.head_position() == 1

    def test_duplicate_within_one_batch_is_stored_once(self, store: EventStore) -> None:
        event = occupancy_started(1)
        result = store.append([event, event])
        assert result.positions == (1,)
        assert result.duplicates == (event.event_id,)

    def test_same_id_with_different_payload_is_refused_and_dead_lettered(
        self, store: EventStore
    ) -> None:
        original = occupancy_started(1)
        store.append([original])
        forged = occupancy_started(1, mgpu=8000, event_id=original.event_id)
        with pytest.raises(DuplicateEventConflict) as info:
            store.append([forged, occupancy_started(2)])
        assert str(original.event_id) in str(info.value)
        assert store.head_position() == 1  # the whole batch was refused
        letters = store.dead_letters()
        assert len(letters) == 1
        assert letters[0].reason == "conflicting-duplicate"
        assert str(original.event_id) in letters[0].error

    def test_expected_version_conflict(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="j")])
        with pytest.raises(ConcurrencyConflict) as info:
            store.append([job_succeeded(2, job="j")], expected_versions={"job/j": 0})
        assert info.value.actual == 1
        store.append([job_succeeded(2, job="j")], expected_versions={"job/j": 1})
        assert store.stream_version("job/j") == 2

    def test_expected_version_zero_claims_a_new_stream(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="new")], expected_versions={"job/new": 0})
        with pytest.raises(ConcurrencyConflict):
            store.append([occupancy_started(2, job="new")], expected_versions={"job/new": 0})

    def test_read_after_pages_in_position_order(self, store: EventStore) -> None:
        batch = [occupancy_started(n) for n in range(25)]
        store.append(batch[:10])
        store.append(batch[10:])
        seen = []
        position = 0
        while page := store.read_after(position, limit=7):
            seen.extend(page)
            position = page[-1].position
        assert [r.position for r in seen] == list(range(1, 26))
        assert [r.envelope.event_id for r in seen] == [e.event_id for e in batch]
        assert [r.envelope.event_id for r in store.iter_all(after=20, page=2)] == [
            e.event_id for e in batch[20:]
        ]

    def test_read_by_type_and_time(self, store: EventStore) -> None:
        store.append([occupancy_started(n) for n in range(10)] + [job_succeeded(50)])
        rows = store.read_by_type(
            ["OccupancyStarted"],
            occurred_from=EPOCH + timedelta(seconds=3),
            occurred_to=EPOCH + timedelta(seconds=6),
        )
        assert [r.envelope.data["occupancy_id"] for r in rows] == ["pod-3", "pod-4", "pod-5"]
        assert [r.envelope.type for r in store.read_by_type(["JobSucceeded"])] == ["JobSucceeded"]

    def test_payload_text_round_trips_exactly(self, store: EventStore) -> None:
        awkward = 'tab\t nl\n cr\r quote" backslash\\ é 日本 \u2028 \\N'
        event = occupancy_started(1).model_copy(
            update={"data": {**occupancy_started(1).data, "pod_name": awkward}}
        )
        store.append([event])
        (read,) = store.read_stream(event.stream)
        assert read.envelope.data["pod_name"] == awkward
        assert read.envelope == event
        assert store.verify().ok

    def test_verify_intact_chain(self, store: EventStore) -> None:
        store.append([occupancy_started(n) for n in range(30)])
        store.append([job_succeeded(n) for n in range(5)])
        result = store.verify(batch=7)
        assert result.ok
        assert result.checked == 35

    def test_concurrent_writers_and_tailing_reader(self, store: EventStore) -> None:
        """Two writers append 1,000 events each; a tailing reader sees each once, in order."""
        per_writer, batch = 1000, 50
        errors: list[BaseException] = []

        def write(offset: int) -> None:
            try:
                for start in range(0, per_writer, batch):
                    store.append(
                        [occupancy_started(offset + n) for n in range(start, start + batch)]
                    )
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(k * 100_000,)) for k in range(2)]
        for w in writers:
            w.start()
        seen: list[int] = []
        ids = []
        position = 0
        deadline = time.monotonic() + 120
        while len(seen) < 2 * per_writer and time.monotonic() < deadline:
            page = store.read_after(position, limit=137)
            for r in page:
                seen.append(r.position)
                ids.append(r.envelope.event_id)
            if page:
                position = page[-1].position
        for w in writers:
            w.join()
        assert not errors
        assert seen == list(range(1, 2 * per_writer + 1))  # no gap, no repeat, commit order
        assert len(set(ids)) == 2 * per_writer
