"""The label and annotation contract: who pays, what a pod asks for, a node's flavor.

The keys, their defaults and their precedence are documented in ``docs/watchers.md``; this
module is that table in code. A label or annotation is tenant input: a value outside its
bound (``ledger.bounds``: a user longer than a label value, an mGPU beyond a node's, text
with NUL) is never published. It falls back to what an absent one means (quantities: the
bound) with a warning in the log, so the object's facts are still recorded — a tenant cannot
escape billing with an absurd label, and the watcher never retries an object it cannot map.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from consumers.watchers.api_values import MIB, parse_quantity, str_map
from ledger.bounds import (
    MAX_CPU_MILLI,
    MAX_FLAVOR,
    MAX_LABEL_VALUE,
    MAX_MEMORY_MIB,
    MAX_MGPU,
    MAX_PRIORITY,
    MIN_PRIORITY,
    OutOfBounds,
    check_text,
)
from ledger.events import MAX_RUN_SECONDS, BillingMode

log = logging.getLogger(__name__)

__all__ = [
    "ANNOTATION_FLAVOR",
    "ANNOTATION_GPU_MILLI",
    "ANNOTATION_MAX_RUN",
    "ANNOTATION_PREEMPTED",
    "ANNOTATION_REFUSED",
    "DEFAULT_BILLING_MODE",
    "DEFAULT_USER",
    "GPU_ANY",
    "LABEL_BILLING_MODE",
    "LABEL_PRIORITY",
    "LABEL_QUOTA",
    "LABEL_USER",
    "LABEL_WORKSPACE",
    "SCHEDULING_GATE",
    "Attribution",
    "Resources",
    "bounded_text",
    "clamped",
    "max_run_seconds",
    "node_flavor",
    "template_resources",
]

LABEL_WORKSPACE: Final = "dlc.ledger/workspace"
LABEL_BILLING_MODE: Final = "dlc.ledger/billing-mode"
LABEL_QUOTA: Final = "dlc.ledger/quota"
LABEL_USER: Final = "dlc.ledger/user"
LABEL_PRIORITY: Final = "dlc.ledger/priority"
LABEL_POOL: Final = "dlc.ledger/pool"
LABEL_RESOURCE_GROUP: Final = "dlc.ledger/resource-group"
LABEL_NODE_BILLING: Final = "dlc.ledger/node-billing-mode"
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
ANNOTATION_GPU_MILLI: Final = "dlc.ledger/gpu-milli"
ANNOTATION_FLAVOR: Final = "dlc.ledger/flavor"
#: a job's maximum run time in whole seconds (the platform's job timeout): the dispatcher
#: stops it once it has run that long (``MaxRunTimeExceeded``)
ANNOTATION_MAX_RUN: Final = "dlc.ledger/max-run-seconds"
#: set by the dispatcher on a pod it deletes to reclaim capacity: the occupancy ends
#: ``preempted``, not ``deleted`` (the value names who preempted)
ANNOTATION_PREEMPTED: Final = "dlc.ledger/preempted-by"
#: on a notebook the dispatcher refused at start: why (docs/dispatch.md)
ANNOTATION_REFUSED: Final = "dlc.ledger/refused"
#: the scheduling gate a service's or notebook's replica pod is created with (an admission
#: webhook adds it, as Kueue's pod integration does): the dispatcher lifts it to admit the
#: replica; a gated pod is bound to no node, so it occupies nothing
SCHEDULING_GATE: Final = "dlc.ledger/admission"
GPU_RESOURCE: Final = "nvidia.com/gpu"
GPU_ANY: Final = "gpu/any"
TRAINING_JOB_NAME: Final = "training.kubeflow.org/job-name"
TRAINING_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
TRAINING_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
BATCH_JOB_NAME: Final = "job-name"
BATCH_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"

DEFAULT_BILLING_MODE: Final[BillingMode] = "public"
DEFAULT_USER: Final = "unknown"
BILLING_MODES: Final = frozenset({"quota", "public", "spot", "idle"})
NODE_BILLING_MODES: Final = frozenset({"subscription", "public", "spot"})


def bounded_text(value: str | None, what: str, limit: int = MAX_LABEL_VALUE) -> str | None:
    """``value`` if it is storable text within ``limit``; else None (the default applies)."""
    if value is None:
        return None
    try:
        check_text(value, what, limit)
    except OutOfBounds as exc:
        log.warning("out-of-bounds %s ignored, its default applies: %s", what, exc)
        return None
    return value


def clamped(value: int, high: int, what: str, low: int = 0) -> int:
    """``value`` within [low, high]: a quantity beyond its bound counts as the bound."""
    if low <= value <= high:
        return value
    log.warning("out-of-bounds %s %d counted as %d", what, value, min(high, max(low, value)))
    return min(high, max(low, value))


@dataclass(frozen=True, slots=True)
class Attribution:
    """Who pays and how: read from labels, then annotations, then documented defaults."""

    workspace: str
    billing_mode: BillingMode
    quota: str | None
    user: str
    priority: int

    @staticmethod
    def read(
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        namespace: str,
        spec_priority: Any = None,
    ) -> Attribution:
        def pick(key: str) -> str | None:
            value = labels.get(key) or annotations.get(key)
            return bounded_text(str(value), key) if value else None

        mode = pick(LABEL_BILLING_MODE)
        billing: BillingMode = mode if mode in BILLING_MODES else DEFAULT_BILLING_MODE  # type: ignore[assignment]
        priority_text = pick(LABEL_PRIORITY)
        try:
            priority = int(priority_text) if priority_text else int(spec_priority or 0)
        except ValueError:
            priority = 0
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            log.warning("out-of-bounds priority %d ignored, 0 applies", priority)
            priority = 0
        return Attribution(
            workspace=pick(LABEL_WORKSPACE) or namespace or "default",
            billing_mode=billing,
            quota=pick(LABEL_QUOTA),
            user=pick(LABEL_USER) or DEFAULT_USER,
            priority=priority,
        )


@dataclass(frozen=True, slots=True)
class Resources:
    """What a pod (template) requests, in the ledger's units, each within its bound."""

    mgpu: int
    cpu_milli: int
    memory_mib: int


def template_resources(
    spec: Mapping[str, Any], annotations: Mapping[str, str]
) -> tuple[Resources, str | None]:
    """Requested resources of a pod spec (mGPU from the annotation when present) and the
    flavor the spec names (its annotation, else its nodeSelector's GPU model; None if none)."""
    cpu = mem = gpu = Decimal(0)
    for container in spec.get("containers") or ():
        res = container.get("resources") or {}
        requests = res.get("requests") or {}
        limits = res.get("limits") or {}
        cpu += parse_quantity(requests.get("cpu", limits.get("cpu")))
        mem += parse_quantity(requests.get("memory", limits.get("memory")))
        gpu += parse_quantity(requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE)))
    milli = annotations.get(ANNOTATION_GPU_MILLI)
    requested = clamped(int(gpu * 1000), MAX_MGPU, "GPU request (mGPU)")
    try:
        mgpu = int(milli) if milli not in (None, "") else requested
    except ValueError:
        mgpu = requested
    if not 0 <= mgpu <= MAX_MGPU:
        log.warning(
            "out-of-bounds %s %r ignored, the GPU request applies", ANNOTATION_GPU_MILLI, milli
        )
        mgpu = requested
    flavor = bounded_text(annotations.get(ANNOTATION_FLAVOR), ANNOTATION_FLAVOR, MAX_FLAVOR)
    if not flavor:
        selector = str_map(spec.get("nodeSelector"))
        model = selector.get(LABEL_GPU_PRODUCT)
        flavor = bounded_text(f"gpu/{model}", "nodeSelector flavor", MAX_FLAVOR) if model else None
    resources = Resources(
        mgpu,
        clamped(int(cpu * 1000), MAX_CPU_MILLI, "CPU request (milli)"),
        clamped(int((mem / MIB).to_integral_value()), MAX_MEMORY_MIB, "memory request (MiB)"),
    )
    return resources, flavor


def max_run_seconds(annotations: Mapping[str, str]) -> int | None:
    """The job's declared maximum run time (:data:`ANNOTATION_MAX_RUN`, whole seconds from 1
    to a year); None when absent, and when not such a number (a warning: no maximum)."""
    text = annotations.get(ANNOTATION_MAX_RUN)
    if text in (None, ""):
        return None
    try:
        seconds = int(str(text).strip())
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= MAX_RUN_SECONDS:
        log.warning(
            "%s %r is not whole seconds in [1, %d]: ignored, no maximum",
            ANNOTATION_MAX_RUN,
            text,
            MAX_RUN_SECONDS,
        )
        return None
    return seconds


def node_flavor(labels: Mapping[str, str]) -> str | None:
    """``gpu/<model>`` from a node's ``nvidia.com/gpu.product`` label, None without one
    (or with one beyond the flavor's bound)."""
    model = labels.get(LABEL_GPU_PRODUCT)
    return bounded_text(f"gpu/{model}", LABEL_GPU_PRODUCT, MAX_FLAVOR) if model else None
