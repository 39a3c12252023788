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

A job that can never fit as configured (``ExceedsMaxQuota``) is, by default, retried as
any job that does not fit: at the head of a holding queue it holds it (PAI's and Kueue's
"the head is retried, never skipped"); ``on_unfit_head="Skip"`` sets it aside instead, so
it holds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from ledger.dispatch.model import Incoming
from ledger.errors import Invalid

__all__ = [
    "AGING_CAP",
    "FIFO_BAND",
    "QueuePolicyName",
    "QueueRun",
    "QueueSettings",
    "UnfitHeadPolicy",
    "balance_window",
    "effective_priority",
    "holds",
    "queue_order",
    "rank_key",
]

#: Intelligent: jobs at or above this priority are served FIFO, before every other job
FIFO_BAND = 7
#: Intelligent: aging lifts a job's effective priority up to this, never into the FIFO band
AGING_CAP = 6

#: PAI's four and Kueue's: the module docstring gives each one's order and skipping rule.
QueuePolicyName = Literal[
    "FIFO", "RoundRobin", "Balance", "Intelligent", "StrictFIFO", "BestEffortFIFO", "Priority"
]


#: what a job that can never fit does in its queue: ``Retry`` (PAI's and Kueue's: tried as
#: any job that does not fit, so at the head of a holding queue it holds it) or ``Skip``
#: (set aside: it holds nothing)
UnfitHeadPolicy = Literal["Retry", "Skip"]

_POLICIES: tuple[str, ...] = get_args(QueuePolicyName)
_UNFIT: tuple[str, ...] = get_args(UnfitHeadPolicy)


@dataclass(frozen=True)
class QueueSettings:
    """A quota's queue policy; the durations matter to ``Balance`` and ``Intelligent``.
    Refused as the quota file refuses them: an unknown policy, a duration not positive."""

    policy: QueuePolicyName = "BestEffortFIFO"
    balance_timeout: timedelta = timedelta(minutes=10)
    aging_interval: timedelta = timedelta(minutes=10)
    on_unfit_head: UnfitHeadPolicy = "Retry"

    def __post_init__(self) -> None:
        if self.policy not in _POLICIES:
            raise Invalid(f"queue policy {self.policy!r} is not one of {', '.join(_POLICIES)}")
        # the quota file takes whole seconds > 0 (docs/quotas.md): 0 has no meaning (a
        # window widening without waiting, aging without end) and would divide by zero
        for what, value in (
            ("balance_timeout", self.balance_timeout),
            ("aging_interval", self.aging_interval),
        ):
            if value <= timedelta(0):
                raise Invalid(f"{what}: {value} is not a positive duration")
        if self.on_unfit_head not in _UNFIT:
            raise Invalid(f"on_unfit_head {self.on_unfit_head!r} is not one of {', '.join(_UNFIT)}")


_HOLDING = frozenset({"FIFO", "StrictFIFO"})


def effective_priority(job: Incoming, settings: QueueSettings, now: datetime) -> int:
    """The priority a job is ordered by: its own, aged under ``Intelligent``."""
    if settings.policy != "Intelligent" or job.priority >= FIFO_BAND:
        return job.priority
    waited = now - job.created_at
    steps = waited // settings.aging_interval if waited.total_seconds() > 0 else 0
    return max(job.priority, min(AGING_CAP, job.priority + steps))


def rank_key(job: Incoming, settings: QueueSettings, now: datetime) -> tuple[int, datetime, str]:
    """The key a queue orders ``job`` by: effective priority (higher first), queue time,
    name. One key for every policy, so queues of different policies merge by it (tree-wide
    positions, heads competing across quotas) in the order each queue keeps: under
    ``Intelligent`` a job of the FIFO band (>= 7) keeps its own priority and an aged one
    stays at most 6, so the band still comes first."""
    return (-effective_priority(job, settings, now), job.created_at, job.job)


def queue_order(jobs: Sequence[Incoming], settings: QueueSettings, now: datetime) -> list[Incoming]:
    """``jobs`` (one quota's) in the policy's order."""
    return sorted(jobs, key=lambda j: rank_key(j, settings, now))


def holds(job: Incoming, settings: QueueSettings) -> bool:
    """Whether ``job``, when it cannot be admitted, stops everything behind it."""
    if settings.policy in _HOLDING:
        return True
    return settings.policy == "Intelligent" and job.priority >= FIFO_BAND


def balance_window(head: Incoming, settings: QueueSettings, now: datetime) -> int:
    """How many waiting jobs ``Balance`` tries: 1 until the head (the first job still
    waiting) has waited longer than ``balance_timeout``, then one more per timeout begun."""
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
        self._now = now
        self._stopped = False
        self._blocked = 0
        self._window: int | None = None
        #: the blocked job that stopped the queue: the untried jobs wait behind it
        self.held_by: Incoming | None = None

    def next(self) -> Incoming | None:
        """The next job to try, or ``None`` when the queue is done for this cycle."""
        if self._stopped or self._next >= len(self._jobs):
            return None
        job = self._jobs[self._next]
        self._next += 1
        return job

    def blocked(self, job: Incoming) -> None:
        """``job`` was tried and is still waiting (no fit, preempting, or never fits)."""
        if holds(job, self.settings):
            self._stopped = True
        elif self.settings.policy == "Balance":
            # Balance's window is the first N jobs still waiting: admitted ones leave it.
            # Its head is the first of them: every job handed out before the first blocked
            # one was admitted, so the window is set from that job's wait, not from a head
            # admitted earlier in the cycle (in a round or as a reserved preemptor alike)
            self._blocked += 1
            if self._window is None:
                self._window = balance_window(job, self.settings, self._now)
            if self._blocked >= self._window:
                self._stopped = True
        if self._stopped and self._next < len(self._jobs):
            self.held_by = job

    def untried(self) -> list[Incoming]:
        """The jobs the queue never handed out (held behind a blocked job)."""
        return self._jobs[self._next :]
