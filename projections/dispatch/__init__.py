"""The dispatcher's side of the read models: its input read from projected state, its
decisions folded back, and the answers built on them (why a job waits, a quota's queue,
start estimates, waits, preemptions and goodput).

``reads`` is a cycle's input; ``decisions`` the latest decision per job (a projection);
``explain`` why a job waits or was preempted; ``queues`` a quota's queue; ``estimates``
start and end estimates and their ranges; ``limits`` the maximum run times jobs declared;
``losses`` what a preemption lost; ``reports`` waits, preemptions, goodput and how good the
stored estimates were. The decisions themselves are pure functions in ``ledger.dispatch``.
"""

from __future__ import annotations

from projections.dispatch.decisions import DispatchDecisionsProjection
from projections.dispatch.estimates import projected_now, run_times, start_estimates
from projections.dispatch.explain import explain_job, jsonable
from projections.dispatch.limits import max_run_times
from projections.dispatch.queues import QueuePage, queue_listing
from projections.dispatch.reads import DecisionRecord, DispatchJob, DispatchView, read_dispatch
from projections.dispatch.reports import (
    GOODPUT_KEYS,
    DecisionWindow,
    decision_counts,
    estimate_coverage,
    estimates_report,
    goodput_report,
    preemptions_report,
    wait_intervals,
    waits_report,
)
from projections.dispatch.schedules import ScheduleRow, schedule_rows

__all__ = [
    "GOODPUT_KEYS",
    "DecisionRecord",
    "DecisionWindow",
    "DispatchDecisionsProjection",
    "DispatchJob",
    "DispatchView",
    "QueuePage",
    "ScheduleRow",
    "decision_counts",
    "estimate_coverage",
    "estimates_report",
    "explain_job",
    "goodput_report",
    "jsonable",
    "max_run_times",
    "preemptions_report",
    "projected_now",
    "queue_listing",
    "read_dispatch",
    "run_times",
    "schedule_rows",
    "start_estimates",
    "wait_intervals",
    "waits_report",
]
