"""What a replay starts from besides the trace: a price book, subscriptions and a quota tree.

All take effect at the replay's epoch (cluster time), not at the wall clock, which may lie
in the middle of the replayed history: the book, then the plan's purchases, then the tree
(checked against what was bought), then the plan's draws and cancellations.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from dlc_ledger.services.prices import publish_price_book
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscription_plans import buy_plan, carve_plan, parse_plan
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
    subscriptions: Path | None = None,
) -> None:
    """Publish ``pricebook``, buy the ``subscriptions`` plan, apply ``quotas`` and carve
    the plan's groups into it (any may be None), effective at ``epoch``."""
    if pricebook is not None:
        result = publish_price_book(store, load_price_book(pricebook), at=epoch)
        say(f"price book {pricebook}: {'published' if result.added else 'already published'}")
    plan = parse_plan(subscriptions.read_text()) if subscriptions is not None else None
    if plan is not None:
        for line in buy_plan(store, plan, epoch, local_principal()):
            say(line)
    if quotas is not None:
        changes = apply_quota_file(store, quotas.read_text(), principal=local_principal(), at=epoch)
        say(f"quotas {quotas}: {len(changes.lines)} changes applied")
    if plan is not None:
        for line in carve_plan(store, plan, epoch, local_principal()):
            say(line)
