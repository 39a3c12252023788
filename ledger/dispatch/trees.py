"""The quota tree as applied (``QuotaSpec`` events folded into a :class:`QuotaTree`) turned
into the decision core's inputs: quota nodes parents first, each leaf's queue settings,
and which trees share fairly.

The live dispatcher, the closed-loop replay and the benchmark build a cycle from a
:class:`DispatchConfig`, so the mapping from the operator's file to the core's semantics
is written once, here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from ledger.dispatch.cycle import QueueSettings
from ledger.dispatch.model import BorrowWithin, Preemption, QuotaNode
from ledger.events import QuotaSpec
from ledger.quotas.model import QuotaTree, topological_order

__all__ = ["DispatchConfig", "dispatch_config", "queue_settings", "quota_node"]

_DEFAULTS = QueueSettings()


@dataclass(frozen=True)
class DispatchConfig:
    """What :func:`~ledger.dispatch.cycle.plan_cycle` needs from the quota tree."""

    #: every quota, parents before their children
    quotas: tuple[QuotaNode, ...] = ()
    #: queue settings by quota (an inner quota's: its own workloads', which run on its own
    #: leaf: :mod:`ledger.dispatch.workloads`)
    queues: Mapping[str, QueueSettings] = field(default_factory=dict)
    #: roots whose tree enables fair sharing (``fair_sharing: true`` on the root quota)
    fair_sharing_roots: frozenset[str] = frozenset()

    @property
    def fair_sharing(self) -> bool:
        """Whether any tree shares fairly (the core's flag is per snapshot)."""
        return bool(self.fair_sharing_roots)


def quota_node(spec: QuotaSpec) -> QuotaNode:
    """One quota spec as the core's node (an inner node's ``min`` is already filled in by
    the quota document, so it is passed as given)."""
    p = spec.preemption
    return QuotaNode(
        name=spec.quota_id,
        parent=spec.parent,
        min=dict(spec.min),
        max=dict(spec.max),
        lend_limit=dict(spec.lend_limit),
        preemption=Preemption(
            within_quota=p.within_quota,
            reclaim=p.reclaim,
            borrow_within=BorrowWithin(
                p.borrow_within.policy, p.borrow_within.max_priority_threshold
            ),
        ),
        weight=float(spec.fair_sharing_weight),
    )


def queue_settings(spec: QuotaSpec) -> QueueSettings:
    """A quota's queue policy; unset durations keep :class:`QueueSettings`' defaults."""
    return QueueSettings(
        policy=spec.queue_policy,
        balance_timeout=(
            timedelta(seconds=spec.balance_timeout)
            if spec.balance_timeout is not None
            else _DEFAULTS.balance_timeout
        ),
        aging_interval=(
            timedelta(seconds=spec.aging_interval)
            if spec.aging_interval is not None
            else _DEFAULTS.aging_interval
        ),
        on_unfit_head=spec.on_unfit_head,
    )


def dispatch_config(tree: QuotaTree) -> DispatchConfig:
    """The core's view of ``tree`` (specs only: workspace bindings decide which quota a
    job queues in, which the caller resolves)."""
    order = topological_order(tree.specs)
    return DispatchConfig(
        quotas=tuple(quota_node(tree.specs[name]) for name in order),
        queues={name: queue_settings(tree.specs[name]) for name in order},
        fair_sharing_roots=frozenset(
            name
            for name in order
            if tree.specs[name].parent is None and tree.specs[name].fair_sharing
        ),
    )
