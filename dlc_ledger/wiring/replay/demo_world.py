"""The demo's one world: the openb history replayed exactly, then twelve live hours decided by
the dispatcher, in one database (issue 46).

The live hours hold copies (:func:`kubesim.traces.live_rows`) of real rows, moved to the
first full hour after openb's end, where nothing of the history still runs:

- openb's rows created in :data:`DEMO_WINDOW` (2027-03-11 00:00-12:00Z, 172 training
  jobs): the trace's own schedule of them is the what-if table's baseline;
- the GPU replicas DLRM's ``app-151`` created in its busiest twelve hours (115 one-GPU
  replicas of one inference service), on a quota the operator adds to the tree as the live
  hours begin (:func:`add_inference`: ``inference``, 20 of the root's 80 GPUs guaranteed,
  reclaiming what training borrows; the history's tree is the demo's, unchanged).

So the world's last twelve hours show what the platform sells: training queued and
preempted while an inference service scales, every replica and job billed as the history.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from dlc_ledger.services.quotas import add_quota
from dlc_ledger.services.yaml_files import load_yaml, parse_quota_tree
from dlc_ledger.wiring.context import local_principal
from kubesim.traces import Trace, live_rows, load_dlrm, load_openb
from ledger.store.postgres import PostgresEventStore

__all__ = [
    "DEMO_WINDOW",
    "INFERENCE_QUOTA",
    "LIVE_SERVICE",
    "DemoWorld",
    "add_inference",
    "demo_world",
    "live_tree",
]

#: twelve busy hours of openb (172 jobs): the training the live hours play again
DEMO_WINDOW = (datetime(2027, 3, 11, tzinfo=UTC), datetime(2027, 3, 11, 12, tzinfo=UTC))
#: the DLRM app whose busiest twelve hours of GPU replicas scale in the live hours
LIVE_SERVICE = "app-151"
#: the quota the live hours add for it: its workspace (the app's name) bound there
INFERENCE_QUOTA: dict[str, Any] = {
    "name": "inference",
    "parent": "openb",
    "min": {"gpu/any": 20000, "cpu": 400000, "memory": 1500000},
    "preemption": {"within_quota": "LowerPriority", "reclaim": "Any"},
    "queue_policy": "Priority",
    "workspaces": ["app_151"],
}
_SERVICE_FROM = 2_221_545  # trace seconds: the first of those twelve hours' replicas
_HOURS_12 = 12 * 3600
_SUFFIX = "-live"


@dataclass(frozen=True)
class DemoWorld:
    trace: Trace
    #: where the history ends and the dispatcher takes over (cluster time)
    live_from: datetime
    #: the live hours, and the window of the history they play again
    live_window: tuple[datetime, datetime]
    #: the window's training rows as the trace ran them, and their live copies (job names)
    trace_jobs: tuple[str, ...]
    live_jobs: tuple[str, ...]


def demo_world() -> DemoWorld:
    """openb, with the live hours appended (module docstring)."""
    openb = load_openb()
    at = (openb.end // 3600 + 1) * 3600
    start, end = (round((t - openb.epoch).total_seconds()) for t in DEMO_WINDOW)
    trained = live_rows(openb, (start, end), at, _SUFFIX)
    dlrm = load_dlrm(epoch=openb.epoch)
    window = (_SERVICE_FROM, _SERVICE_FROM + _HOURS_12)
    replicas = tuple(
        i
        for i in dlrm.instances
        if i.service == LIVE_SERVICE and i.gpu_milli > 0 and window[0] <= i.created < window[1]
    )
    served = live_rows(
        Trace(dlrm.name, dlrm.epoch, (), replicas, dlrm.end), window, at, _SUFFIX,
        keep_services=True,
    )  # fmt: skip
    copies = tuple(i for i in served.instances if i.job_name.endswith(_SUFFIX))
    trace = replace(
        trained,
        instances=(*trained.instances, *copies),
        end=max(trained.end, served.end),
    )
    live_from = openb.epoch + timedelta(seconds=at)
    trace_jobs = tuple(i.job_name for i in openb.instances if start <= i.created < end)
    return DemoWorld(
        trace=trace,
        live_from=live_from,
        live_window=(live_from, live_from + timedelta(seconds=end - start)),
        trace_jobs=trace_jobs,
        live_jobs=tuple(f"{name}{_SUFFIX}" for name in trace_jobs),
    )


def live_tree(demo_tree: str) -> str:
    """The demo tree (YAML text) with :data:`INFERENCE_QUOTA` added: the tree of the live
    hours (the root's 80 GPUs: online 40, offline 20, inference 20)."""
    document = load_yaml(demo_tree)
    document["quotas"] = [*document["quotas"], INFERENCE_QUOTA]
    return yaml.safe_dump(document, sort_keys=False)


def add_inference(store: PostgresEventStore, demo_tree: str, at: datetime) -> None:
    """Add :data:`INFERENCE_QUOTA` to the tree as applied (the subscriptions' draws kept),
    at ``at``: the operator's change as the live hours begin."""
    spec = parse_quota_tree(live_tree(demo_tree)).specs[INFERENCE_QUOTA["name"]]
    add_quota(store, spec, INFERENCE_QUOTA["workspaces"], principal=local_principal(), at=at)
