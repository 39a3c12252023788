"""Every table of the schema on its one ``MetaData``: what Alembic compares the database with.

Importing this module imports each module that declares tables, so :data:`metadata`
holds them all: the event store's (:mod:`ledger.store.schema`), each read model's (in its
projection's module) and the watchers' (:mod:`ledger.store.watcher_tables`). A table
declared anywhere else would escape the drift test (``tests/store/test_schema_drift.py``).
"""

from __future__ import annotations

import ledger.store.access_tokens
import ledger.store.watcher_tables  # noqa: F401  (the imports register their tables)
from ledger.store.schema import metadata

__all__ = ["metadata"]
