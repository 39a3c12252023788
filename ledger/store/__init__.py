"""The event store: an abstract port (:mod:`ledger.store.base`) and its adapter.

PostgreSQL (:mod:`ledger.store.postgres`) is the product's one adapter: read models are
PostgreSQL tables by design, so the port hands projections an SQLAlchemy ``Connection``.
An in-memory fake (``tests/support/memory_store.py``) passes the same contract suite
(``tests/ledger/store/contract.py``) for the store's own rules; it runs no projection.

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
