"""Where the checkout is, for tests that read its files (docs, ops, the OpenAPI document)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT"]

ROOT = Path(__file__).resolve().parents[2]
