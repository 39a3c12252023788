"""Contract tests every event store adapter must pass.

Subclass :class:`EventStoreContract` per adapter (as ``eventsourcing`` subclasses its
recorder test cases) and provide two fixtures: ``store``, an empty store, and
``new_store``, a factory of empty stores for property tests that need one per example
(a context manager: the adapter's clean-up runs when it exits). The tests here then run
against that adapter unchanged: ``tests/ledger/store/test_postgres_store.py`` and
``tests/ledger/store/test_memory_store.py``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.envelopes import Envelope
from ledger.store.base import (
    ConcurrencyConflict,
    DuplicateEventConflict,
    EventStore,
    StoreError,
    UnitOfWork,
)
from tests.support.factories import EPOCH, job_succeeded, occupancy_started

#: ``new_store``: each call gives a fresh empty store for the ``with`` block.
NewStore = Callable[[], AbstractContextManager[EventStore]]


class _Abort(Exception):
    """Raised inside a transaction to roll it back."""


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

    @settings(
        max_examples=15,
        deadline=None,
        # each adapter's subclass runs it (differing executors); the store it needs comes
        # fresh from new_store per example, never from the function-scoped fixture
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(st.lists(st.lists(st.integers(min_value=0, max_value=60), max_size=12), max_size=6))
    def test_any_sequence_of_batches_reads_back_identical(
        self, new_store: NewStore, batches: list[list[int]]
    ) -> None:
        with new_store() as store:
            expected = []
            seen = set()
            for numbers in batches:
                batch = [occupancy_started(n, job=f"j{n % 5}") for n in numbers]
                store.append(batch)
                for e in batch:
                    if e.event_id not in seen:
                        seen.add(e.event_id)
                        expected.append(e)
            assert [r.envelope for r in store.iter_all(page=7)] == expected
            for stream in {e.stream for e in expected}:
                assert [r.envelope for r in store.read_stream(stream)] == [
                    e for e in expected if e.stream == stream
                ]
            assert store.verify().ok

    # -- versions and reads ----------------------------------------------------------------

    def test_versions_count_per_stream_positions_globally(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="a"), occupancy_started(2, job="b")])
        store.append([job_succeeded(3, job="a"), job_succeeded(4, job="b")])
        rows = store.read_after(0)
        assert [(r.stream, r.version, r.position) for r in rows] == [
            ("job/a", 1, 1),
            ("job/b", 1, 2),
            ("job/a", 2, 3),
            ("job/b", 2, 4),
        ]
        assert len({r.recorded_at for r in rows[:2]}) == 1  # one batch, one recording time
        assert [r.position for r in store.read_stream("job/b", after_version=1)] == [4]
        assert store.read_stream("job/b", after_version=2) == []
        assert store.read_stream("job/none") == []
        assert store.head_position() == 4

    def test_an_empty_store(self, store: EventStore) -> None:
        assert store.head_position() == 0
        assert store.read_after(0) == []
        assert list(store.iter_all()) == []
        assert store.dead_letters(include_resolved=True) == []
        result = store.verify()
        assert result.ok and result.checked == 0

    def test_read_by_type_pages_after_a_position(self, store: EventStore) -> None:
        store.append([occupancy_started(n) for n in range(6)] + [job_succeeded(9)])
        first = store.read_by_type(["OccupancyStarted", "JobSucceeded"], limit=4)
        assert [r.position for r in first] == [1, 2, 3, 4]
        rest = store.read_by_type(["OccupancyStarted", "JobSucceeded"], after_position=4)
        assert [r.position for r in rest] == [5, 6, 7]
        assert store.read_by_type(["NoSuchType"]) == []

    def test_a_conflicting_version_stores_none_of_the_batch(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="a")])
        with pytest.raises(ConcurrencyConflict) as info:
            store.append(
                [occupancy_started(2, job="b"), job_succeeded(3, job="a")],
                expected_versions={"job/b": 0, "job/a": 0},
            )
        assert (info.value.stream, info.value.expected, info.value.actual) == ("job/a", 0, 1)
        assert store.head_position() == 1
        assert store.stream_version("job/b") == 0

    def test_expected_versions_alone_only_check(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="a")])
        assert store.append([], expected_versions={"job/a": 1}).positions == ()
        with pytest.raises(ConcurrencyConflict):
            store.append([], expected_versions={"job/a": 2})
        assert store.append([]).positions == ()
        assert store.head_position() == 1

    def test_duplicates_of_stored_and_batch_events_are_reported(self, store: EventStore) -> None:
        stored = occupancy_started(1)
        store.append([stored])
        fresh = occupancy_started(2)
        result = store.append([stored, fresh, fresh])
        assert result.positions == (2,)
        assert sorted(map(str, result.duplicates)) == sorted(
            [str(stored.event_id), str(fresh.event_id)]
        )

    def test_a_conflict_within_one_batch_is_refused(self, store: EventStore) -> None:
        event = occupancy_started(1)
        forged = occupancy_started(1, mgpu=8000, event_id=event.event_id)
        with pytest.raises(DuplicateEventConflict):
            store.append([event, forged])
        assert store.head_position() == 0
        assert [letter.reason for letter in store.dead_letters()] == ["conflicting-duplicate"]

    def test_read_events_are_the_readers_own(self, store: EventStore) -> None:
        # a reader changing what it read must not change what is stored
        store.append([occupancy_started(1)])
        (first,) = store.read_after(0)
        first.data["mgpu"] = -1
        (again,) = store.read_after(0)
        assert again.data["mgpu"] != -1
        assert store.verify().ok

    # -- units of work ---------------------------------------------------------------------

    def test_a_unit_of_work_commits_everything_or_nothing(self, store: EventStore) -> None:
        def work(fail: bool) -> None:
            with store.transaction() as uow:
                uow.append([occupancy_started(1)])
                uow.save_checkpoint("reader", position=1, offsets={"t:0": 5})
                uow.record_dead_letter(source="s", reason="r", error="e", payload=b"p")
                if fail:
                    raise _Abort

        with pytest.raises(_Abort):
            work(fail=True)
        assert store.head_position() == 0
        with store.transaction() as uow:
            assert uow.load_checkpoint("reader").position == 0
        assert store.dead_letters() == []
        work(fail=False)
        assert store.head_position() == 1
        with store.transaction() as uow:
            checkpoint = uow.load_checkpoint("reader")
        assert (checkpoint.position, dict(checkpoint.offsets)) == (1, {"t:0": 5})
        assert [letter.payload for letter in store.dead_letters()] == [b"p"]

    def test_an_open_unit_of_work_is_invisible_to_readers(self, store: EventStore) -> None:
        with store.transaction() as uow:
            uow.append([occupancy_started(1)])
            uow.save_checkpoint("reader", position=1)
            assert uow.load_checkpoint("reader").position == 1  # its own writes, yes
            assert store.head_position() == 0
            assert store.read_after(0) == []
        assert store.head_position() == 1

    def test_appends_in_one_unit_of_work_chain_on(self, store: EventStore) -> None:
        with store.transaction() as uow:
            first = uow.append([occupancy_started(1, job="a")])
            again = uow.append([occupancy_started(1, job="a"), job_succeeded(2, job="a")])
            with pytest.raises(ConcurrencyConflict):
                uow.append([job_succeeded(3, job="a")], expected_versions={"job/a": 1})
        assert first.positions == (1,)
        assert again.positions == (2,) and len(again.duplicates) == 1
        assert [r.version for r in store.read_stream("job/a")] == [1, 2]
        assert store.verify().ok

    def test_a_refused_append_leaves_the_unit_of_work_usable(self, store: EventStore) -> None:
        original = occupancy_started(1)
        store.append([original])
        forged = occupancy_started(1, mgpu=8000, event_id=original.event_id)
        with store.transaction() as uow:
            uow.save_checkpoint("reader", position=7)
            with pytest.raises(DuplicateEventConflict):
                uow.append([occupancy_started(2), forged])
            assert uow.append([occupancy_started(3)]).positions == (2,)
        assert [r.data["occupancy_id"] for r in store.read_after(0)] == ["pod-1", "pod-3"]
        with store.transaction() as uow:
            assert uow.load_checkpoint("reader").position == 7
        assert store.dead_letters() == []  # refused inside a unit of work: the caller decides

    def test_dead_letter_mode_keeps_the_evidence_and_stores_the_rest(
        self, store: EventStore
    ) -> None:
        original = occupancy_started(1)
        store.append([original])
        forged = occupancy_started(1, mgpu=8000, event_id=original.event_id)
        twin = occupancy_started(5)
        twin_forged = occupancy_started(5, mgpu=8000, event_id=twin.event_id)
        with store.transaction() as uow:
            result = uow.append(
                [forged, occupancy_started(2), twin, twin_forged], on_conflict="dead-letter"
            )
        assert result.positions == (2, 3)
        assert [r.data["occupancy_id"] for r in store.read_after(1)] == ["pod-2", "pod-5"]
        letters = store.dead_letters()
        assert [letter.reason for letter in letters] == ["conflicting-duplicate"] * 2
        assert sorted(letter.payload for letter in letters) == sorted(
            [forged.to_json(), twin_forged.to_json()]
        )
        assert sorted(letter.error for letter in letters) == sorted(
            str(DuplicateEventConflict(event.event_id)) for event in (original, twin)
        )

    # -- reads inside a unit of work (what projection steps read) ----------------------------

    def test_a_unit_reads_windows_streams_and_positions(self, store: EventStore) -> None:
        # positions 1-6: job a (1, 3, 5), job b (2, 4), job a's end (6)
        store.append(
            [
                occupancy_started(1, job="a"),
                occupancy_started(2, job="b"),
                occupancy_started(3, job="a"),
                occupancy_started(4, job="b"),
                occupancy_started(5, job="a"),
                job_succeeded(6, job="a"),
            ]
        )

        def at(rows: list[Any]) -> list[int]:
            return [r.position for r in rows]

        with store.transaction() as uow:
            assert uow.head_position() == 6
            assert at(uow.read_window(1, 4)) == [2, 3, 4]
            assert at(uow.read_window(0, 6, ["JobSucceeded"])) == [6]
            assert at(uow.read_window(0, 6, [])) == []
            assert at(uow.read_window(4, 99)) == [5, 6]  # what exists of the window
            assert at(uow.read_stream("job/a")) == [1, 3, 5, 6]
            assert at(uow.read_stream("job/a", upto=4)) == [1, 3]
            assert uow.read_stream("job/none") == []
            assert at(uow.read_streams(["job/b", "job/a"], before=5)) == [1, 2, 3, 4]
            assert at(uow.read_positions([6, 2, 2, 99])) == [2, 6]
            assert uow.read_positions([]) == []
            (event,) = uow.read_positions([6])
            assert event == store.read_after(5)[0]  # the same recorded event, every field
            # its own appends too, before they commit
            uow.append([job_succeeded(7, job="b")])
            assert uow.head_position() == 7
            assert at(uow.read_window(5, 7)) == [6, 7]
            assert at(uow.read_stream("job/b")) == [2, 4, 7]
            assert at(uow.read_streams(["job/b"], before=8)) == [2, 4, 7]
            assert at(uow.read_positions([7])) == [7]
            # by event id (an audit trail following causes), in position order
            ids = [e.event_id for e in uow.read_positions([7, 2])]
            assert at(uow.read_ids([*reversed(ids), uuid.uuid4()])) == [2, 7]
            assert uow.read_ids([]) == []
            assert store.head_position() == 6

    def test_checkpoints_locked_for_a_step_start_at_zero(self, store: EventStore) -> None:
        with store.transaction() as uow:
            uow.save_checkpoint("projection:b", position=4)
        with store.transaction() as uow:
            assert uow.lock_checkpoints(["projection:b", "projection:a"]) == {
                "projection:a": 0,
                "projection:b": 4,
            }
            uow.save_checkpoint("projection:a", position=2)
        with store.transaction() as uow:
            assert uow.lock_checkpoints(["projection:a"]) == {"projection:a": 2}
            assert uow.load_checkpoint("projection:a").position == 2

    def test_a_locked_checkpoint_waits_for_the_unit_holding_it(self, store: EventStore) -> None:
        holding, taken = threading.Event(), threading.Event()
        seen: list[int] = []

        def second() -> None:
            holding.wait()
            with store.transaction() as uow:
                seen.append(uow.lock_checkpoints(["projection:new"])["projection:new"])
                taken.set()

        other = threading.Thread(target=second)
        other.start()
        with store.transaction() as uow:
            uow.lock_checkpoints(["projection:new"])  # new: even the first step is exclusive
            holding.set()
            assert not taken.wait(0.5)  # the other unit waits for this one
            uow.save_checkpoint("projection:new", position=9)
        other.join(10)
        assert seen == [9]  # and then sees what this one committed

    # -- snapshots, signals, look-ups ----------------------------------------------------------

    def test_a_snapshot_is_one_view_and_refuses_writes(self, store: EventStore) -> None:
        store.append([occupancy_started(1, job="a")])
        with store.transaction() as uow:
            uow.save_checkpoint("reader", position=1)
        with store.snapshot() as view:
            assert view.head_position() == 1
            assert view.load_checkpoint("reader").position == 1
            store.append([occupancy_started(2, job="a")])  # committed meanwhile
            with store.transaction() as uow:
                uow.save_checkpoint("reader", position=2)
            assert view.head_position() == 1
            assert [r.position for r in view.read_stream("job/a")] == [1]
            assert view.read_window(0, 2) == store.read_after(0, limit=1)
            assert view.load_checkpoint("reader").position == 1
            writes: list[Callable[[UnitOfWork], object]] = [
                lambda u: u.append([occupancy_started(3)]),
                lambda u: u.save_checkpoint("reader", position=3),
                lambda u: u.load_checkpoint("reader", for_update=True),
                lambda u: u.lock_checkpoints(["reader"]),
                lambda u: u.lock_appends(),
                lambda u: u.record_dead_letter(source="s", reason="r", error="e", payload=b"p"),
            ]
            for write in writes:
                with pytest.raises(StoreError, match="read-only"):
                    write(view)
        assert store.head_position() == 2 and store.dead_letters() == []
        with store.snapshot() as view:
            assert view.head_position() == 2
            assert view.load_checkpoint("reader").position == 2

    def test_the_append_signal_wakes_a_tailing_reader(self, store: EventStore) -> None:
        with store.appends() as signal:
            assert signal.wait(0.05) is False  # nothing appended: it times out
            appender = threading.Timer(0.2, store.append, [[occupancy_started(1)]])
            appender.start()
            started = time.monotonic()
            woke = signal.wait(10)
            appender.join()
            assert woke and time.monotonic() - started < 5
            with store.transaction() as uow:  # a commit that appends nothing: no signal
                uow.save_checkpoint("reader", position=1)
            assert signal.wait(0.2) is False

    def test_stored_event_ids_and_may_write(self, store: EventStore) -> None:
        stored, absent = occupancy_started(1), occupancy_started(2)
        store.append([stored])
        assert store.stored_event_ids([stored.event_id, absent.event_id]) == {stored.event_id}
        assert store.stored_event_ids([]) == set()
        assert store.may_write()

    # -- checkpoints -----------------------------------------------------------------------

    def test_checkpoints_keep_what_a_save_does_not_name(self, store: EventStore) -> None:
        with store.transaction() as uow:
            unknown = uow.load_checkpoint("ingest")
            assert (unknown.name, unknown.position, dict(unknown.offsets)) == ("ingest", 0, {})
            assert unknown.updated_at is None
            uow.save_checkpoint("ingest", offsets={"t:0": 10, "t:1": 3})
        with store.transaction() as uow:
            uow.save_checkpoint("ingest", offsets={"t:1": 8, "t:2": 1})
            uow.save_checkpoint("ingest", position=42)
        with store.transaction() as uow:
            saved = uow.load_checkpoint("ingest", for_update=True)
            uow.save_checkpoint("other", position=5)
        assert saved.position == 42
        assert dict(saved.offsets) == {"t:0": 10, "t:1": 8, "t:2": 1}  # merged per partition
        assert saved.updated_at is not None
        with store.transaction() as uow:
            other = uow.load_checkpoint("other")
        assert (other.position, dict(other.offsets)) == (5, {})

    def test_checkpoints_by_prefix_are_listed_and_deleted(self, store: EventStore) -> None:
        with store.transaction() as uow:
            uow.save_checkpoint("watch:c1:pods", offsets={"rv": 7})
            uow.save_checkpoint("watch:c1:nodes", offsets={"rv": 3})
            uow.save_checkpoint("watch:c10:pods", offsets={"rv": 1})
            uow.save_checkpoint("watch_c1:pods", position=1)  # "_" is no wildcard
            assert [c.name for c in uow.checkpoints("watch:c1:")] == [
                "watch:c1:nodes",
                "watch:c1:pods",
            ]
        with store.snapshot() as view:
            (pods,) = [c for c in view.checkpoints("watch:c1:") if c.name.endswith("pods")]
            assert dict(pods.offsets) == {"rv": 7} and pods.updated_at is not None
        with store.transaction() as uow:
            uow.delete_checkpoints("watch:c1:")
            assert uow.checkpoints("watch:c1:") == []  # its own deletes, at once
            uow.save_checkpoint("watch:c1:pods", offsets={"rv": 9})  # and saved again
        with store.transaction() as uow:
            assert [(c.name, dict(c.offsets)) for c in uow.checkpoints("watch:")] == [
                ("watch:c10:pods", {"rv": 1}),  # code point order: "0" < ":"
                ("watch:c1:pods", {"rv": 9}),
            ]
            assert uow.load_checkpoint("watch:c1:nodes").updated_at is None
            assert uow.load_checkpoint("watch_c1:pods").position == 1
        with pytest.raises(_Abort), store.transaction() as uow:
            uow.delete_checkpoints("watch:")
            raise _Abort  # rolled back: all kept
        with store.snapshot() as view:
            assert len(view.checkpoints("watch:")) == 2
            with pytest.raises(StoreError, match="read-only"):
                view.delete_checkpoints("watch:")
        with store.transaction() as uow:
            uow.delete_checkpoints("watch:")
        with store.transaction() as uow:
            assert [c.name for c in uow.checkpoints("")] == ["watch_c1:pods"]

    # -- dead letters ----------------------------------------------------------------------

    def test_dead_letters_count_repeats_and_reopen(self, store: EventStore) -> None:
        with store.transaction() as uow:
            first = uow.record_dead_letter(
                source="ingest",
                reason="invalid",
                error="bad 1",
                payload=b"\x00raw",
                topic="events",
                partition=2,
                offset=17,
            )
            other = uow.record_dead_letter(
                source="ingest", reason="invalid", error="bad", payload=b"other"
            )
        assert other != first
        with store.transaction() as uow:
            again = uow.record_dead_letter(
                source="ingest",
                reason="unknown-type",
                error="bad 2" + "x" * 5000,
                payload=b"\x00raw",
            )
        assert again == first
        letter = store.dead_letter(first)
        assert letter is not None
        assert (letter.count, letter.reason, letter.payload) == (2, "unknown-type", b"\x00raw")
        assert letter.error.startswith("bad 2") and len(letter.error) == 4000
        assert (letter.topic, letter.partition, letter.offset) == ("events", 2, 17)
        assert letter.first_seen <= letter.last_seen and letter.resolved_at is None
        assert store.dead_letter(max(first, other) + 1000) is None

        store.resolve_dead_letter(first)
        assert [d.id for d in store.dead_letters()] == [other]
        resolved = store.dead_letter(first)
        assert resolved is not None and resolved.resolved_at is not None
        assert sorted(d.id for d in store.dead_letters(include_resolved=True)) == sorted(
            [first, other]
        )
        with store.transaction() as uow:  # seen again: open again
            uow.record_dead_letter(source="ingest", reason="r", error="e", payload=b"\x00raw")
        reopened = store.dead_letter(first)
        assert reopened is not None and reopened.resolved_at is None and reopened.count == 3
        store.resolve_dead_letter(max(first, other) + 1000)  # unknown: nothing happens
        assert len(store.dead_letters()) == 2

    def test_a_lease_has_one_holder_until_released(self, store: EventStore) -> None:
        first = store.try_lease("dispatcher")
        assert first is not None and first.alive()
        assert store.try_lease("dispatcher") is None  # held: the second instance waits
        other = store.try_lease("another-role")  # names are independent
        assert other is not None
        first.release()
        first.release()  # idempotent
        assert not first.alive()
        second = store.try_lease("dispatcher")
        assert second is not None and second.alive()
        second.release()
        other.release()
