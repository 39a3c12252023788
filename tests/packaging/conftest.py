"""Fixtures of the packaging tests: the Kafka tests' real Tansu broker (imported, not copied)."""

from __future__ import annotations

from tests.kafka.conftest import bootstrap, broker

__all__ = ["bootstrap", "broker"]
