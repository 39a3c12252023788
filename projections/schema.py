"""Every table of the schema on its one ``MetaData``: what Alembic compares the database with.

Importing this module imports each module that declares tables, so :data:`metadata`
holds them all: the event store's (:mod:`ledger.store.schema`) and the other tables of the
store's database (:mod:`ledger.store.access_tokens`, :mod:`ledger.store.watcher_tables`),
and each read model's (in its context's ``tables`` module). A table declared anywhere else
would escape the drift test (``tests/ledger/store/test_schema_drift.py``).
"""

from __future__ import annotations

from ledger.store import access_tokens, notification_tables, watcher_tables
from ledger.store.schema import metadata
from projections.billing import tables as billing_tables
from projections.budgets import projection as budget_tables
from projections.dispatch import decisions as decision_tables
from projections.extent import projection as extent_tables
from projections.inventory import occupancy as occupancy_tables
from projections.inventory import projection as inventory_tables
from projections.jobs import tables as job_tables
from projections.quotas import tables as quota_tables

__all__ = ["TABLE_MODULES", "metadata"]

#: The modules whose import registers their tables on :data:`metadata` (named here, so no
#: linter can drop an import that looks unused).
TABLE_MODULES = (
    access_tokens,
    notification_tables,
    watcher_tables,
    billing_tables,
    budget_tables,
    decision_tables,
    extent_tables,
    inventory_tables,
    occupancy_tables,
    job_tables,
    quota_tables,
)
