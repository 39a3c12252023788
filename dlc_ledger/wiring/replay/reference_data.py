"""What a replay starts from besides the trace: a price book, subscriptions and a quota tree.

All take effect at the replay's epoch (cluster time), not at the wall clock, which may lie
in the middle of the replayed history: the book, then the plan's purchases, then the tree
(checked against what was bought), then the plan's draws and cancellations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import yaml

from dlc_ledger.services.billing import publish_price_book
from dlc_ledger.services.budgets import apply_budget_file
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.services.subscriptions import buy_plan, carve_plan, parse_plan
from dlc_ledger.services.yaml_files import load_price_book, load_yaml
from dlc_ledger.wiring.context import local_principal
from ledger.quotas.what_if import reshaped_document
from ledger.store.postgres import PostgresEventStore

__all__ = ["QuotaFile", "apply_reference_data", "reshaped_tree"]


@dataclass(frozen=True)
class QuotaFile:
    """A quota tree's text and what to call it in messages (a file, or one reshaped)."""

    label: str
    text: str


def reshaped_tree(path: Path, policy: str | None, scale: Decimal | None) -> QuotaFile:
    """The tree at ``path``, reshaped for a what-if (:mod:`ledger.quotas.what_if`)."""
    text = path.read_text()
    if policy is None and scale is None:
        return QuotaFile(str(path), text)
    shaped = reshaped_document(load_yaml(text), policy=policy, scale=scale)
    how = ", ".join(
        ([f"every queue {policy}"] if policy else []) + ([f"quantities x {scale}"] if scale else [])
    )
    return QuotaFile(f"{path} ({how})", yaml.safe_dump(shaped, sort_keys=False))


def apply_reference_data(
    store: PostgresEventStore,
    quotas: Path | QuotaFile | None,
    pricebook: Path | None,
    epoch: datetime,
    say: Callable[[str], None],
    subscriptions: Path | None = None,
    budgets: Path | None = None,
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
        tree = (
            quotas if isinstance(quotas, QuotaFile) else QuotaFile(str(quotas), quotas.read_text())
        )
        changes = apply_quota_file(store, tree.text, principal=local_principal(), at=epoch)
        say(f"quotas {tree.label}: {len(changes.lines)} changes applied")
    if plan is not None:
        for line in carve_plan(store, plan, epoch, local_principal()):
            say(line)
    if budgets is not None:
        applied = apply_budget_file(
            store, budgets.read_text(), principal=local_principal(), at=epoch
        )
        say(f"budgets {budgets}: {len(applied.lines)} changes applied")
