"""When a job crossed a rule's time limit: its status episodes, read from its transitions.

A job's ``transitions`` are its status changes in order, ``(status, since)``. An episode is
one stay in a status: from its ``since`` to the next change (or still open). A rule's
``waiting_longer_than`` fires for an episode in a waiting status that lasted longer than
the limit, ``running_longer_than`` for one in ``Running``; the fact is stamped with the
instant the limit was crossed. Reading episodes, not only the status of the moment, is
what makes a wait that ended between two looks of the matcher count: looking once at the
end and looking every second find the same crossings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

__all__ = ["RUNNING", "WAITING", "crossings"]

WAITING = frozenset({"Creating", "Queuing", "Admitted", "Preempted"})
RUNNING = frozenset({"Running"})


def crossings(
    transitions: Sequence[tuple[str, datetime]],
    statuses: frozenset[str],
    limit: timedelta,
    now: datetime,
) -> list[tuple[datetime, datetime]]:
    """``(began, crossed_at)`` of each episode in ``statuses`` that lasted longer than
    ``limit``, crossed by ``now`` (an open episode lasts until ``now``)."""
    out: list[tuple[datetime, datetime]] = []
    for i, (status, began) in enumerate(transitions):
        if status not in statuses:
            continue
        ended = transitions[i + 1][1] if i + 1 < len(transitions) else None
        crossed = began + limit
        if crossed <= now and (ended is None or ended > crossed):
            out.append((began, crossed))
    return out
