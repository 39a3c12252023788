"""The notification tests' broker, for the replayed slice (one real Tansu per session)."""

from __future__ import annotations

from tests.kafka.conftest import bootstrap, broker

__all__ = ["bootstrap", "broker"]
