"""The quota figures behind a pending reason: for each resource key a job requests, what
each quota on its path guarantees, caps, uses and has available, by the core's own capacity
arithmetic (:class:`~ledger.dispatch.capacity.Tree`), so ``jobs why`` shows the very numbers
the dispatcher compared. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.dispatch.capacity import Tree
from ledger.dispatch.model import Admitted, Incoming, QuotaNode
from ledger.dispatch.workloads import is_own_leaf, moved, place

__all__ = ["KeyFigures", "blocking_figures"]


@dataclass(frozen=True)
class KeyFigures:
    """One resource key at one quota on the job's path (its leaf first, then ancestors)."""

    quota: str
    key: str
    request: float
    #: guaranteed (an inner node's: its subtree's)
    min: float
    #: cap including borrowing; None: none of its own
    max: float | None
    #: what the quota's subtree's admitted jobs request
    used: float
    #: Kueue's ``available``: what a job there could get now (its idle guarantee plus
    #: what its parent has to lend, capped by ``max``)
    available: float
    #: what it could get with nothing admitted anywhere (below the request: never fits)
    capacity: float

    @property
    def short(self) -> bool:
        """The request does not fit in what is available here."""
        return self.request > self.available

    @property
    def never(self) -> bool:
        """The request exceeds what this quota could ever get."""
        return self.request > self.capacity


def blocking_figures(
    quotas: Iterable[QuotaNode], admitted: Iterable[Admitted], job: Incoming
) -> tuple[KeyFigures, ...]:
    """Per requested key (in key order), one row per quota from the job's leaf to its root
    (a workload on an inner quota: from that quota, its own leaf left out)."""
    nodes, inner = place(tuple(quotas), (*admitted, job))
    admitted = [moved(wl, inner) for wl in admitted]
    job = moved(job, inner)
    now = Tree(nodes, admitted)
    empty = Tree(nodes, ())
    own_cap = job.billing_mode != "idle"  # an idle job may borrow past its quota's max
    rows: list[KeyFigures] = []
    for key in sorted(k for k, v in job.resources.items() if v > 0):
        for name in now.ancestry(job.quota):
            if is_own_leaf(name):
                continue
            rows.append(
                KeyFigures(
                    quota=name,
                    key=key,
                    request=job.resources[key],
                    min=now.min(name, key),
                    max=now.nodes[name].max.get(key),
                    used=now.raw_usage(name, key),
                    available=now.available(name, key, own_cap=own_cap or name != job.quota),
                    capacity=empty.available(name, key, own_cap=own_cap or name != job.quota),
                )
            )
    return tuple(rows)
