"""Dead letters after the fact: look one up, and retry it once the code can read it.

A message is dead-lettered when it could not be stored (an unknown event type, an
invalid payload). After an upgrade teaches the store its type, a retry validates the
payload again and appends it; the letter is then resolved. Works on any event store
(the port), so the rule is tested without a database.

A long-running part quarantines an item it cannot handle the same way (issue 44: poison
never stops a process), and a retry requeues it by its letter's source:

- ``projection:<name>``: a stored event the projection's fold raised on
  (:mod:`projections.steps`). The event is in the store already; a retry rebuilds the
  projection in one transaction (readers see the old rows until it commits), so the
  event is folded again, in order, by the code now running. Should it still fail, it is
  skipped as before and the letter reopens (:attr:`Retried.still_failing`).
- the sources of :data:`RECHECKED_SOURCES` (a watched object, a subscription, a period
  close, a job's decision, a budget check): the part looks at the item again at its next
  tick, cycle or relist by itself, so a retry only resolves the letter; an item that still
  fails is quarantined again and the letter reopens.

``dead-letters resolve ID`` (:func:`resolve`) discards a letter: it is marked resolved,
nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from dlc_ledger.services.errors import InvalidRequest, NotFound
from ledger.catalogue import envelope_from_wire
from ledger.envelopes import EventDecodeError
from ledger.store.base import DeadLetter, EventStore
from projections.registry import projection_named
from projections.steps import CHECKPOINT_PREFIX, advance_on, checkpoint_name

__all__ = [
    "RECHECKED_SOURCES",
    "DeadLetterNotFound",
    "Retried",
    "StillInvalid",
    "find_dead_letter",
    "resolve",
    "retry_dead_letter",
]

#: Sources (prefixes) of letters whose item the part that quarantined it looks at again
#: by itself (next tick, cycle or relist): retrying one resolves it, nothing more.
RECHECKED_SOURCES = (
    "watch:",  # a watched Kubernetes object (consumers/watchers/runner.py), re-read at relist
    "scheduler/subscriptions",  # a subscription's renewal/expiry/recognition, every tick
    "scheduler/close",  # a (workspace, period) close, every tick
    "dispatcher/decision",  # a job's decision, every cycle (consumers/dispatcher/loop.py)
    "budgets/check",  # a budget's crossing, every check (processes/budgets/checks.py)
    # a rule the event centre's matcher could not look at, every round (an event it could
    # not read as a fact is not matched again: retrying only resolves that letter)
    "notifications/matcher",
)

_REBUILD_PAGE = 50_000


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
    #: what the retry did: "stored" (a message), "refolded" (a projection rebuilt),
    #: "requeued" (the part looks at the item again by itself)
    action: str = "stored"
    #: a refolded event the projection's fold still raises on (its letter reopened)
    still_failing: bool = False


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
    if letter.source.startswith(CHECKPOINT_PREFIX):
        return _refold(store, letter)
    if letter.source.startswith(RECHECKED_SOURCES):
        store.resolve_dead_letter(letter_id)
        return Retried(letter_id, "", stored=False, action="requeued")
    try:
        envelope = envelope_from_wire(letter.payload)
    except EventDecodeError as exc:
        raise StillInvalid(letter_id, exc) from None
    result = store.append([envelope])
    store.resolve_dead_letter(letter_id)
    return Retried(letter_id, str(envelope.event_id), stored=bool(result.positions))


def resolve(store: EventStore, letter_id: int) -> DeadLetter:
    """Discard a letter: mark it resolved, store nothing (seen again, it reopens)."""
    letter = find_dead_letter(store, letter_id)
    store.resolve_dead_letter(letter_id)
    return letter


def _refold(store: EventStore, letter: DeadLetter) -> Retried:
    """Rebuild the letter's projection in one transaction (:mod:`projections.steps`)."""
    projection = projection_named(letter.source.removeprefix(CHECKPOINT_PREFIX))
    event_id = str(orjson.loads(letter.payload).get("event_id", ""))
    store.resolve_dead_letter(letter.id)
    with store.transaction() as uow:
        uow.load_checkpoint(checkpoint_name(projection), for_update=True)
        projection.reset(uow.connection)
        uow.save_checkpoint(checkpoint_name(projection), position=0)
        while advance_on(uow, [projection], page_size=_REBUILD_PAGE):
            pass
    again = store.dead_letter(letter.id)
    failing = again is not None and again.resolved_at is None
    return Retried(letter.id, event_id, stored=False, action="refolded", still_failing=failing)
