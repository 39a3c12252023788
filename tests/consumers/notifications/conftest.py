"""The notification tests' receivers (real HTTP servers on loopback) and broker (one real
Tansu per session, for the replayed slice)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.consumers.notifications.receiver import Receiver

__all__ = ["receiver", "second"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def second() -> Iterator[Receiver]:
    """Another receiver: another rule's, another tenant's."""
    r = Receiver()
    yield r
    r.close()
