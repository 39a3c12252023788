"""Spillover: which replica of a service runs beyond its quota's capacity, on public resources.

An inference service that asks for it (``dlc.ledger/spillover: public``) keeps serving when
its quota is full: the replicas beyond the quota's guaranteed capacity run on public
resources, billed by use, while the ones within it stay prepaid (EAS's "virtual resource
group": a baseline plus pay-as-you-go beyond it). Billing decides each replica's mode once,
when it starts, from the quota's projected state then (docs/workloads.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.events import QuotaSpec
from ledger.quotas.flavors import counted_flavor

__all__ = ["spills"]


def spills(spec: QuotaSpec, flavor: str, mgpu: int, occupied: Iterable[tuple[str, int]]) -> bool:
    """Whether a replica asking ``mgpu`` of ``flavor`` goes beyond quota ``spec``'s capacity.

    ``occupied`` is what the quota's prepaid occupancies hold when the replica starts, as
    ``(flavor, mgpu)``. The capacity is the quota's guaranteed ``min`` of the key the flavor
    counts against (:func:`counted_flavor`; none named: 0). A replica without GPUs never
    spills: GPUs are what a quota's subscribed nodes are bought for.
    """
    if mgpu <= 0:
        return False
    key = counted_flavor(spec, flavor)
    held = sum(m for f, m in occupied if counted_flavor(spec, f) == key)
    return held + mgpu > spec.min.get(key, 0)
