"""How far the read models are behind the store, and waiting for them to reach a position.

Reads never write: a read shows the read models as the projector (and the write use
cases, right after their appends) left them, and says how far behind the store's head
they are, so a reader knows what it is looking at. A caller that just wrote (and knows
the position of its write) can ask to wait, bounded, until every read model has
projected that position: read-your-writes without a read that projects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ledger.errors import Invalid, Unavailable
from ledger.store.base import EventStore, UnitOfWork
from projections.steps import CHECKPOINT_PREFIX

__all__ = ["MAX_WAIT_SECONDS", "Freshness", "read_freshness", "wait_for_position"]

#: The longest a read may wait for a position (a careless client cannot hold a worker).
MAX_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Freshness:
    """The store's head and the lowest position every read model has projected."""

    head: int
    projected: int

    @property
    def behind(self) -> int:
        """Events the read models have still to project (0: current)."""
        return max(0, self.head - self.projected)


def read_freshness(uow: UnitOfWork) -> Freshness:
    """Head and projected position, as ``uow`` sees them (one snapshot: no lock, no write).

    A store no projection has run on yet counts as projected to 0."""
    head = uow.head_position()
    positions = [c.position for c in uow.checkpoints(CHECKPOINT_PREFIX)]
    return Freshness(head, min(positions, default=0))


def wait_for_position(
    store: EventStore,
    position: int,
    timeout: float,
    *,
    poll: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Freshness:
    """Wait until every read model has projected ``position``, at most ``timeout`` seconds
    (capped at :data:`MAX_WAIT_SECONDS`); :class:`Unavailable` when it has not by then."""
    if position < 0:
        raise Invalid(f"a position is 0 or more, got {position}")
    if not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise Invalid(f"a wait is 0 to {MAX_WAIT_SECONDS:g} seconds, got {timeout:g}")
    deadline = clock() + timeout
    while True:
        with store.snapshot() as uow:
            seen = read_freshness(uow)
        if seen.projected >= position:
            return seen
        if seen.head < position:
            raise Invalid(f"position {position} is beyond the store's head ({seen.head})")
        if clock() >= deadline:
            raise Unavailable(
                f"the read models reached position {seen.projected}, not {position}, "
                f"within {timeout:g} s (is the projector running?)"
            )
        sleep(poll)
