"""The event store: an abstract port (:mod:`ledger.store.base`) and its PostgreSQL adapter.

Domain modules never import this package; the composition root and the
consumers do.
"""

from ledger.store.base import (
    AppendResult,
    Checkpoint,
    ConcurrencyConflict,
    DeadLetter,
    DuplicateEventConflict,
    EventStore,
    RecordedEvent,
    StoreError,
    UnitOfWork,
    VerifyResult,
)

__all__ = [
    "AppendResult",
    "Checkpoint",
    "ConcurrencyConflict",
    "DeadLetter",
    "DuplicateEventConflict",
    "EventStore",
    "RecordedEvent",
    "StoreError",
    "UnitOfWork",
    "VerifyResult",
]
