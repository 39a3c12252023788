"""Queue policies: the order of one quota's pending jobs, and which of them a cycle tries.

Every policy orders by priority (higher first), then by when the job was queued, then by
name (PAI queues its jobs by priority too). What differs is what a job that cannot be
admitted does to the jobs behind it:

- ``FIFO`` (PAI), ``StrictFIFO`` (Kueue): it *holds* the queue: nothing behind it is tried;
- ``RoundRobin`` (PAI), ``Priority``, ``BestEffortFIFO`` (Kueue): it is skipped (and, for
  ``BestEffortFIFO``, parked by the cycle until something relevant changes);
- ``Balance`` (PAI): as FIFO while the head has waited at most ``balance_timeout``; then
  round-robin over the first 2 waiting jobs, 3 after two timeouts, one more per timeout;
- ``Intelligent`` (PAI): jobs of priority >= 7 first, as FIFO; below that round-robin, in
  order of an *effective* priority that gains +1 per ``aging_interval`` waited, capped at 6
  (aging never lifts a job into the FIFO band).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ledger.dispatch.model import Incoming

__all__ = [
    "AGING_CAP",
    "FIFO_BAND",
    "QueuePolicyName",
    "QueueRun",
    "QueueSettings",
    "balance_window",
    "effective_priority",
    "holds",
    "queue_order",
]

#: Intelligent: jobs at or above this priority are served FIFO, before every other job
FIFO_BAND = 7
#: Intelligent: aging lifts a job's effective priority up to this, never into the FIFO band
AGING_CAP = 6

#: PAI's four and Kueue's: the module docstring gives each one's order and skipping rule.
QueuePolicyName = Literal[
    "FIFO", "RoundRobin", "Balance", "Intelligent", "StrictFIFO", "BestEffortFIFO", "Priority"
]


@dataclass(frozen=True)
class QueueSettings:
    """A quota's queue policy; the durations matter to ``Balance`` and ``Intelligent``."""

    policy: QueuePolicyName = "BestEffortFIFO"
    balance_timeout: timedelta = timedelta(minutes=10)
    aging_interval: timedelta = timedelta(minutes=10)


_HOLDING = frozenset({"FIFO", "StrictFIFO"})


def effective_priority(job: Incoming, settings: QueueSettings, now: datetime) -> int:
    """The priority a job is ordered by: its own, aged under ``Intelligent``."""
    if settings.policy != "Intelligent" or job.priority >= FIFO_BAND:
        return job.priority
    waited = now - job.created_at
    steps = waited // settings.aging_interval if waited.total_seconds() > 0 else 0
    return max(job.priority, min(AGING_CAP, job.priority + steps))


def queue_order(jobs: Sequence[Incoming], settings: QueueSettings, now: datetime) -> list[Incoming]:
    """``jobs`` (one quota's) in the policy's order."""
    if settings.policy == "Intelligent":
        return sorted(
            jobs,
            key=lambda j: (
                j.priority < FIFO_BAND,
                -effective_priority(j, settings, now),
                j.created_at,
                j.job,
            ),
        )
    return sorted(jobs, key=lambda j: (-j.priority, j.created_at, j.job))


def holds(job: Incoming, settings: QueueSettings) -> bool:
    """Whether ``job``, when it cannot be admitted, stops everything behind it."""
    if settings.policy in _HOLDING:
        return True
    return settings.policy == "Intelligent" and job.priority >= FIFO_BAND


def balance_window(head: Incoming, settings: QueueSettings, now: datetime) -> int:
    """How many waiting jobs ``Balance`` tries: 1 until the head has waited longer than
    ``balance_timeout``, then one more per timeout begun."""
    waited = (now - head.created_at).total_seconds()
    timeout = settings.balance_timeout.total_seconds()
    if waited <= timeout:
        return 1
    return math.ceil(waited / timeout)


class QueueRun:
    """One quota's queue during one cycle: hands out the jobs to try, in order, and stops
    as its policy says once jobs cannot be admitted."""

    def __init__(self, quota: str, jobs: list[Incoming], settings: QueueSettings, now: datetime):
        self.quota = quota
        self.settings = settings
        self._jobs = jobs
        self._next = 0
        self._stopped = False
        self._blocked = 0
        self._window = (
            balance_window(jobs[0], settings, now)
            if jobs and settings.policy == "Balance"
            else None
        )

    def next(self) -> Incoming | None:
        """The next job to try, or ``None`` when the queue is done for this cycle."""
        if self._stopped or self._next >= len(self._jobs):
            return None
        job = self._jobs[self._next]
        self._next += 1
        return job

    def blocked(self, job: Incoming) -> None:
        """``job`` was tried and is still waiting (no fit, or preempting)."""
        if holds(job, self.settings):
            self._stopped = True
        elif self._window is not None:
            # Balance's window is the first N jobs still waiting: admitted ones leave it
            self._blocked += 1
            if self._blocked >= self._window:
                self._stopped = True

    def untried(self) -> list[Incoming]:
        """The jobs the queue never handed out (held behind a blocked job)."""
        return self._jobs[self._next :]
