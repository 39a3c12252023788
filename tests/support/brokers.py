"""Fixtures of the Kafka pipeline tests: one real Tansu broker per session, a topic per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumers.topics import ensure_topic
from dlc_ledger.wiring.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    embedded = EmbeddedBroker(tmp_path_factory.mktemp("tansu"), topic="dlc.cluster-events")
    embedded.start()
    yield embedded
    embedded.stop()


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap


@pytest.fixture
def topic(bootstrap: str) -> str:
    """A fresh 4-partition topic, so tests never see each other's messages."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    ensure_topic(bootstrap, name, partitions=4)
    return name


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
