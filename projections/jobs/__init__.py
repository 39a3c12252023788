"""Job state and audit timeline: "what is my job doing, and what happened to it, why, by whom".

One row per job uid in ``job_state`` (current status, when it entered each status,
who submitted it where, requested resources, restart and preemption counts, time
spent running and goodput), and its timeline: every event about the job, each with a
one-line summary, its source, ``by`` and ``reason``. The events of the job's own stream
``job/<uid>`` (nearly all of them) are read from the store when asked for (it is
append-only and indexed by stream, so a copy would only double the writes);
``job_timeline`` holds rows for the events about the job recorded on other streams
(decisions naming it, a pod reported on another job's stream).

The read model in modules named for what they hold: its tables
(:mod:`projections.jobs.tables`), the job state machine and fold order
(:mod:`projections.jobs.fold`, no IO), the timeline's text (:mod:`projections.jobs.timeline`),
the projection that folds pages into the tables (:mod:`projections.jobs.projection`)
and the reads behind ``jobs list|show`` (:mod:`projections.jobs.queries`); a service's or
notebook's replicas over time (:mod:`projections.jobs.workloads`).
"""

from __future__ import annotations

from projections.jobs.as_at import existed_by, preemptions_at, status_at
from projections.jobs.events import event_by_id, stream_events
from projections.jobs.fold import FINAL_STATUSES, STATUSES, fold_order, parse_time
from projections.jobs.projection import JobsProjection
from projections.jobs.queries import (
    JobPage,
    find_job,
    job_detail,
    jobs_by_uid,
    known_workspaces,
    late_flags,
    list_jobs,
    timeline_entries,
    timeline_rows,
)
from projections.jobs.tables import job_state, job_timeline, job_workspace_quotas
from projections.jobs.workloads import occupied_history, replica_history, workload_detail
from projections.pages import MAX_PAGE

__all__ = [
    "FINAL_STATUSES",
    "MAX_PAGE",
    "STATUSES",
    "JobPage",
    "JobsProjection",
    "event_by_id",
    "existed_by",
    "find_job",
    "fold_order",
    "job_detail",
    "job_state",
    "job_timeline",
    "job_workspace_quotas",
    "jobs_by_uid",
    "known_workspaces",
    "late_flags",
    "list_jobs",
    "occupied_history",
    "parse_time",
    "preemptions_at",
    "replica_history",
    "status_at",
    "stream_events",
    "timeline_entries",
    "timeline_rows",
    "workload_detail",
]
