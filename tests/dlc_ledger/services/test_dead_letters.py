"""Retrying a dead letter, on the in-memory store: the rule needs no database."""

from __future__ import annotations

import pytest

from dlc_ledger.services.errors import NotFound
from dlc_ledger.services.store import (
    DeadLetterNotFound,
    StillInvalid,
    find_dead_letter,
    retry_dead_letter,
)
from tests.support.factories import occupancy_started
from tests.support.memory_store import MemoryEventStore


def _letters(store: MemoryEventStore, *payloads: bytes) -> list[int]:
    with store.transaction() as uow:
        return [
            uow.record_dead_letter(source="kafka", reason="unknown-type", error="x", payload=p)
            for p in payloads
        ]


def test_a_readable_letter_is_stored_once_and_resolved() -> None:
    store = MemoryEventStore()
    good = occupancy_started(1)
    (letter,) = _letters(store, good.to_json())
    done = retry_dead_letter(store, letter)
    assert (done.letter_id, done.event_id, done.stored) == (letter, str(good.event_id), True)
    assert [r.event_id for r in store.read_after(0)] == [good.event_id]
    assert store.dead_letters() == []
    assert find_dead_letter(store, letter).resolved_at is not None
    # a second retry finds the event stored: nothing appended, still resolved
    assert not retry_dead_letter(store, letter).stored
    assert store.head_position() == 1


def test_a_still_invalid_letter_stays_open() -> None:
    store = MemoryEventStore()
    (letter,) = _letters(store, b"{nope")
    with pytest.raises(StillInvalid, match=r"^still invalid \(invalid-schema\): ") as caught:
        retry_dead_letter(store, letter)
    assert caught.value.reason == "invalid-schema" and caught.value.letter_id == letter
    assert [d.id for d in store.dead_letters()] == [letter]
    assert store.head_position() == 0


def test_an_unknown_id_is_not_found() -> None:
    store = MemoryEventStore()
    with pytest.raises(DeadLetterNotFound, match="no dead letter with id 7") as caught:
        retry_dead_letter(store, 7)
    assert isinstance(caught.value, NotFound) and isinstance(caught.value, LookupError)
