"""The demo price book and quota tree the product ships, as the paths tests hand to commands.

Tests run from a checkout, where package data are plain files: the resources are paths.
"""

from __future__ import annotations

from importlib.resources.abc import Traversable
from pathlib import Path

from dlc_ledger import resources

__all__ = ["COMBINED_QUOTAS", "DEMO_PRICE_BOOK", "DEMO_QUOTAS"]


def _on_disk(resource: Traversable) -> Path:
    assert isinstance(resource, Path), f"{resource} is not a file on disk"
    return resource


DEMO_PRICE_BOOK = _on_disk(resources.DEMO_PRICE_BOOK)
DEMO_QUOTAS = _on_disk(resources.DEMO_QUOTAS)
COMBINED_QUOTAS = _on_disk(resources.COMBINED_QUOTAS)
