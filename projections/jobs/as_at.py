"""A job as it stood at an instant, rebuilt from its ``job_state`` row: the row keeps every
status change (``transitions``), so its status then, since when, how long it had run and
how often it had been preempted by then follow from it.

``jobs list --at``, ``queue show --at`` and ``jobs why --at`` all read the past through
these functions, so there is one reconstruction of a job's past, not one per command.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import TextClause, text

from ledger.canonical import format_timestamp
from projections.jobs.fold import micros, parse_time

__all__ = ["as_at", "existed_by", "preemptions_at", "running_us_at", "status_at"]

Transitions = Sequence[Sequence[str]]


def existed_by(at: datetime) -> TextClause:
    """``job_state`` rows of the jobs that existed at ``at``: a job's first transition is
    its first fact, so a job whose first one is later did not exist yet."""
    return text("(job_state.transitions -> 0 ->> 1)::timestamptz <= :existed_by").bindparams(
        existed_by=at
    )


def status_at(transitions: Transitions, at: datetime) -> tuple[str, str] | None:
    """The (status, since) in force at ``at``; None before the job existed."""
    current = None
    for status, since in transitions:
        if parse_time(since) > at:
            break
        current = (status, since)
    return current


def running_us_at(transitions: Transitions, at: datetime) -> int:
    """Microseconds spent Running up to ``at``."""
    total = 0
    running_since: datetime | None = None
    for status, since in transitions:
        moment = min(parse_time(since), at)
        if running_since is not None:
            total += micros(moment - running_since)
            running_since = None
        if status == "Running" and moment < at:
            running_since = moment
    if running_since is not None:
        total += micros(at - running_since)
    return total


def preemptions_at(transitions: Transitions, at: datetime, total: int) -> int:
    """How many times the job had been preempted by ``at`` (``total``: by now). Every
    preemption enters ``Preempted`` unless the job was already there, so the entries
    by then, never more than the total, count them."""
    entered = sum(
        1 for status, since in transitions if status == "Preempted" and parse_time(since) <= at
    )
    return min(entered, total)


def _jsonable_seconds(us: int) -> int | float:
    seconds = Decimal(us) / 1_000_000
    return int(seconds) if seconds == seconds.to_integral_value() else float(seconds)


def as_at(job: dict[str, Any], transitions: Transitions, at: datetime) -> None:
    """Rewrite the time-dependent fields of a listed job (``jobs list``'s JSON-ready
    dict) as they stood at ``at``."""
    status, since = status_at(transitions, at) or ("Creating", job["submitted_at"])
    job["status"], job["status_since"] = status, since
    job["entered"] = {s: t for s, t in job["entered"].items() if parse_time(t) <= at}
    for key in ("ended_at", "deleted_at"):
        if job[key] is not None and parse_time(job[key]) > at:
            job[key] = None
    if job["ended_at"] is None:
        job["goodput"] = None
    job["running_seconds"] = _jsonable_seconds(running_us_at(transitions, at))
    job["at"] = format_timestamp(at)
