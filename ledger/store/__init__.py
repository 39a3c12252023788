"""The event store: an abstract port (:mod:`ledger.store.base`) and its adapters.

PostgreSQL (:mod:`ledger.store.postgres`) for the product; in memory
(:mod:`ledger.store.memory`) for domain and decision tests that need no database.

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
