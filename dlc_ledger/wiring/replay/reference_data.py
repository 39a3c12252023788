"""What a replay starts from besides the trace: a price book and a quota tree, at the epoch.

Both take effect at the replay's epoch (cluster time), not at the wall clock, which may lie
in the middle of the replayed history.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from dlc_ledger.services.prices import publish_price_book
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.yaml_files import load_price_book
from dlc_ledger.wiring.context import local_principal
from ledger.store.postgres import PostgresEventStore

__all__ = ["apply_reference_data"]


def apply_reference_data(
    store: PostgresEventStore,
    quotas: Path | None,
    pricebook: Path | None,
    epoch: datetime,
    say: Callable[[str], None],
) -> None:
    """Publish ``pricebook`` and apply ``quotas`` (either may be None) effective at ``epoch``."""
    if pricebook is not None:
        result = publish_price_book(store, load_price_book(pricebook), at=epoch)
        say(f"price book {pricebook}: {'published' if result.added else 'already published'}")
    if quotas is not None:
        changes = apply_quota_file(store, quotas.read_text(), principal=local_principal(), at=epoch)
        say(f"quotas {quotas}: {len(changes.lines)} changes applied")
