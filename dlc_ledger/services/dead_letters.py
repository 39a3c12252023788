"""Dead letters after the fact: look one up, and retry it once the code can read it.

A message is dead-lettered when it could not be stored (an unknown event type, an
invalid payload). After an upgrade teaches the store its type, a retry validates the
payload again and appends it; the letter is then resolved. Works on any event store
(the port), so the rule is tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlc_ledger.services.errors import InvalidRequest, NotFound
from ledger.catalogue import envelope_from_wire
from ledger.envelopes import EventDecodeError
from ledger.store.base import DeadLetter, EventStore

__all__ = ["DeadLetterNotFound", "Retried", "StillInvalid", "find_dead_letter", "retry_dead_letter"]


class DeadLetterNotFound(NotFound):
    """No dead letter has the id asked for."""


class StillInvalid(InvalidRequest):
    """The payload still does not decode into a known, valid event."""

    def __init__(self, letter_id: int, error: EventDecodeError) -> None:
        super().__init__(f"still invalid ({error.reason}): {error}")
        self.letter_id = letter_id
        self.reason = error.reason


@dataclass(frozen=True)
class Retried:
    letter_id: int
    event_id: str
    stored: bool  # False: the event was already in the store (the letter is resolved anyway)


def find_dead_letter(store: EventStore, letter_id: int) -> DeadLetter:
    letter = store.dead_letter(letter_id)
    if letter is None:
        raise DeadLetterNotFound(f"no dead letter with id {letter_id}")
    return letter


def retry_dead_letter(store: EventStore, letter_id: int) -> Retried:
    """Validate the letter's payload again and store it; then mark the letter resolved.

    A payload that is still invalid is refused (:class:`StillInvalid`) and the letter
    stays open.
    """
    letter = find_dead_letter(store, letter_id)
    try:
        envelope = envelope_from_wire(letter.payload)
    except EventDecodeError as exc:
        raise StillInvalid(letter_id, exc) from None
    result = store.append([envelope])
    store.resolve_dead_letter(letter_id)
    return Retried(letter_id, str(envelope.event_id), stored=bool(result.positions))
