"""Every table of the schema on its one ``MetaData``: what Alembic compares the database with.

Importing this module imports each module that declares tables, so :data:`metadata`
holds them all: the event store's (:mod:`ledger.store.schema`), each read model's (in its
projection's module) and the watchers' (:mod:`projections.watcher_tables`). A table
declared anywhere else would escape the drift test (``tests/store/test_schema_drift.py``).
"""

from __future__ import annotations

import projections.access_tokens
import projections.billing_tables
import projections.budgets
import projections.dispatch_decisions
import projections.inventory
import projections.jobs
import projections.occupancy
import projections.quotas
import projections.watcher_tables  # noqa: F401  (the imports register their tables)
from ledger.store.schema import metadata

__all__ = ["metadata"]
