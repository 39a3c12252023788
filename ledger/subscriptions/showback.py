"""Showback of prepaid cost: a subscription's recognised revenue attributed to workspaces.

A prepaid workspace runs its jobs at zero (billing mode ``quota``): its cost is the
subscription's, paid by one workspace when ordered. What the capacity costs *in a
period*, and who it costs, is the revenue recognised in that period, attributed by
guarantee (docs/subscriptions.md, "Showback of prepaid cost"):

1. **What is attributed**: each subscription's revenue as the ledger recognises it: each
   UTC day's recognition (:func:`~ledger.subscriptions.recognition.recognition_days`),
   counted in a window when the day ends inside it, and at an immediate cancellation the
   consumed part not recognised by then (negative when the 5-day refund gives revenue
   back). Each amount is attributed as of its *instant*: the day's first instant, or the
   instant just before the cancellation (its capacity still counted).
2. **Over the quotas drawing on the group**, with the tree and the bindings in force at
   that instant, by the group's capacity then (its schedulable subscriptions' mGPU; CPU
   milli-cores for a group of CPU nodes). A quota's guarantee on the group is its
   ``min`` summed over ``gpu/*`` (``cpu`` for a CPU group), and for a quota drawing on
   several groups, the part of it in proportion to those groups' capacities then. The
   **top** quotas drawing on the group (whose parent does not) share the amount by
   guarantee / capacity each; what nobody guarantees (capacity - the guarantees, when
   positive) goes to ``(unattributed)`` (its quota too). When the guarantees exceed the capacity (a
   forced tree) they share all of it by guarantee.
3. **Down the tree**: a quota's part goes to its children drawing on the same group by
   their guarantee / its own (the same rule, children over-guaranteeing share it all),
   and the rest stays with the quota itself: shared evenly by the workspaces bound to
   it, or ``(unattributed)`` (with the quota's name) when none is bound.
4. **Rounding**: the shares are exact fractions, summed per group and currency over the
   period (each month, when grouped by month); then each is floored to a minor unit and
   the minor units left over go one each to the largest remainders (ties: by workspace,
   then quota): the largest-remainder method, so a group's shares add up to its
   recognised revenue of the period exactly.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import partial
from math import floor

from ledger.envelopes import EventData
from ledger.events import (
    QuotaChanged,
    QuotaCreated,
    QuotaDeleted,
    QuotaSpec,
    WorkspaceBound,
)
from ledger.quotas.model import QuotaTree
from ledger.subscriptions.capacity import drawing_groups
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.recognition import recognised_by, recognition_days

__all__ = [
    "NO_QUOTA",
    "UNATTRIBUTED",
    "Attribution",
    "RevenuePiece",
    "TreeTimeline",
    "attribute",
    "largest_remainder",
    "revenue_pieces",
    "showback",
]

#: The workspace of revenue no workspace bears: capacity nobody guarantees, or the part
#: of a quota no workspace is bound to.
UNATTRIBUTED = "(unattributed)"
#: The quota of capacity nobody guarantees (not ``-``, the cost reports' "no quota").
NO_QUOTA = UNATTRIBUTED
_JUST_BEFORE = timedelta(microseconds=1)


@dataclass(frozen=True)
class RevenuePiece:
    """An amount of ``sub``'s recognised revenue: at ``at`` (attributed as of then), in
    month ``month`` (``YYYY-MM``, UTC: the ledger's period of it)."""

    sub: Subscription
    at: datetime
    month: str
    amount_minor: int


def _month(t: datetime) -> str:
    u = t.astimezone(UTC)
    return f"{u.year:04d}-{u.month:02d}"


def revenue_pieces(sub: Subscription, start: datetime, end: datetime) -> Iterator[RevenuePiece]:
    """``sub``'s revenue recognised in ``[start, end)``: the days ending in ``(start,
    end]`` (a day is recognised once it has ended), and an immediate cancellation's
    consumed-but-unrecognised part when it falls in ``[start, end)``."""
    stop = sub.cancelled.effective_at if sub.cancelled is not None else None
    for term, _nodes, _addition in sub.parts():  # the terms, and the nodes added to them
        for lo, hi, amount in recognition_days(term, stop or term.ends_at):
            if hi > end:
                break
            if hi > start:
                yield RevenuePiece(sub, lo, _month(lo), amount)
    cancelled = sub.cancelled
    if cancelled is not None and cancelled.mode == "immediately":
        at = cancelled.effective_at
        if start <= at < end:
            deferred = sum(
                t.amount_minor - recognised_by(t, at) for t, _, _ in sub.parts() if t.ends_at > at
            )
            amount = deferred - cancelled.refund_minor
            if amount:
                yield RevenuePiece(sub, at - _JUST_BEFORE, _month(at), amount)


class TreeTimeline:
    """The quota tree (specs and bindings) at any instant, from its events with the
    instant each took effect (cluster time), folded in (instant, store order)."""

    def __init__(self, events: Iterable[tuple[datetime, EventData]]) -> None:
        ordered = sorted(enumerate(events), key=lambda item: (item[1][0], item[0]))
        self._instants: list[datetime] = []
        self._trees: list[QuotaTree] = []
        specs: dict[str, QuotaSpec] = {}
        bindings: dict[str, str] = {}
        for _, (at, event) in ordered:
            if isinstance(event, QuotaCreated | QuotaChanged):
                specs[event.spec.quota_id] = event.spec
            elif isinstance(event, QuotaDeleted):
                specs.pop(event.quota_id, None)
            elif isinstance(event, WorkspaceBound):
                if event.quota is None:
                    bindings.pop(event.workspace, None)
                else:
                    bindings[event.workspace] = event.quota
            else:
                continue
            tree = QuotaTree(specs=dict(specs), bindings=dict(bindings))
            if self._instants and self._instants[-1] == at:
                self._trees[-1] = tree
            else:
                self._instants.append(at)
                self._trees.append(tree)

    def at(self, t: datetime) -> QuotaTree:
        """The tree in force at ``t``: every change at or before it."""
        index = bisect.bisect_right(self._instants, t)
        return self._trees[index - 1] if index else QuotaTree()


#: (workspace, quota) -> its exact share of an amount
Attribution = dict[tuple[str, str], Fraction]


def _measure_gpu(sub: Subscription) -> bool:
    return sub.node.gpus > 0


def _capacity(subs: Sequence[Subscription], group: str, at: datetime, gpu: bool) -> int:
    # the nodes held at ``at``: a count changed at a renewal or nodes added mid-term
    # count from their instant (0 outside the subscription's schedulable life)
    return sum(
        s.nodes_at(at) * (s.node.gpus * 1000 if gpu else s.node.cpu_milli)
        for s in subs
        if s.group == group
    )


def _capacity_in(
    subs: Sequence[Subscription], at: datetime, gpu_of: Mapping[str, bool], gpu: bool, group: str
) -> int:
    return _capacity(subs, group, at, gpu_of.get(group, gpu))


def _guarantee(spec: QuotaSpec, gpu: bool) -> int:
    if gpu:
        return sum(q for k, q in spec.min.items() if k.startswith("gpu/"))
    return spec.min.get("cpu", 0)


def attribute(
    amount: Fraction,
    group: str,
    tree: QuotaTree,
    capacity_of: Callable[[str], int],
    guarantee_of: Callable[[QuotaSpec], int],
) -> Attribution:
    """``amount`` of ``group``'s revenue over ``tree``'s quotas and workspaces by the
    module's rule, exactly; ``capacity_of(g)``: group ``g``'s capacity then,
    ``guarantee_of``: a quota's guarantee in the same measure."""
    drawn = drawing_groups(tree.specs)
    out: Attribution = defaultdict(Fraction)
    members = sorted(q for q, groups in drawn.items() if group in groups)

    def on_group(q: str) -> Fraction:
        groups = drawn[q]
        whole = guarantee_of(tree.specs[q])
        if len(groups) == 1:
            return Fraction(whole)
        caps = {g: capacity_of(g) for g in groups}
        total = sum(caps.values())
        return Fraction(whole * caps[group], total) if total else Fraction(whole, len(groups))

    guarantee = {q: on_group(q) for q in members}

    def parent_draws(q: str) -> bool:
        parent = tree.specs[q].parent
        return parent is not None and parent in guarantee

    children: dict[str, list[str]] = defaultdict(list)
    for q in members:
        if parent_draws(q):
            children[str(tree.specs[q].parent)].append(q)

    def split(
        share: Fraction, whole: Fraction, parts: Sequence[str]
    ) -> tuple[dict[str, Fraction], Fraction]:
        """``share`` over ``parts`` by guarantee / ``whole`` (or all of it by guarantee
        when they guarantee more): their shares, and what is left."""
        given = sum((guarantee[p] for p in parts), Fraction(0))
        base = max(whole, given)
        if not base:
            return {}, share
        shares = {p: share * guarantee[p] / base for p in parts if guarantee[p]}
        return shares, share - sum(shares.values(), Fraction(0))

    def down(q: str, share: Fraction) -> None:
        kids, own = split(share, guarantee[q], children.get(q, []))
        for kid, part in kids.items():
            down(kid, part)
        if not own:
            return
        bound = tree.workspaces_of(q)
        if not bound:
            out[(UNATTRIBUTED, q)] += own
            return
        for ws in bound:
            out[(ws, q)] += own / len(bound)

    tops = [q for q in members if not parent_draws(q)]
    shares, rest = split(amount, Fraction(capacity_of(group)), tops)
    for q, part in shares.items():
        down(q, part)
    if rest:
        out[(UNATTRIBUTED, NO_QUOTA)] += rest
    return dict(out)


def largest_remainder(
    total: int, shares: Mapping[tuple[str, str], Fraction]
) -> dict[tuple[str, str], int]:
    """``shares`` (exact, summing to ``total``) in whole minor units summing to ``total``:
    each floored, the units left over one each to the largest remainders (ties: by key)."""
    floors = {k: floor(v) for k, v in shares.items()}
    left = total - sum(floors.values())
    order = sorted(shares, key=lambda k: (-(shares[k] - floors[k]), k))
    for k in order[:left]:
        floors[k] += 1
    return floors


#: (group, currency, month or None) -> (workspace, quota) -> minor units
Showback = dict[tuple[str, str, str | None], dict[tuple[str, str], int]]


def showback(
    subs: Sequence[Subscription],
    trees: TreeTimeline,
    start: datetime,
    end: datetime,
    *,
    by_month: bool,
) -> Showback:
    """Each group's revenue recognised in ``[start, end)`` (per month when ``by_month``),
    attributed and rounded by the module's rule: per (group, currency, month or None),
    the whole minor units of each (workspace, quota), adding up to the group's revenue."""
    exact: dict[tuple[str, str, str | None], Attribution] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    totals: dict[tuple[str, str, str | None], int] = defaultdict(int)
    gpu_of = {s.group: _measure_gpu(s) for s in subs}
    for sub in subs:
        for piece in revenue_pieces(sub, start, end):
            key = (sub.group, sub.currency, piece.month if by_month else None)
            totals[key] += piece.amount_minor
            gpu = gpu_of[sub.group]
            shares = attribute(
                Fraction(piece.amount_minor),
                sub.group,
                trees.at(piece.at),
                partial(_capacity_in, subs, piece.at, gpu_of, gpu),
                partial(_guarantee, gpu=gpu),
            )
            into = exact[key]
            for who, part in shares.items():
                into[who] += part
    return {
        key: {who: v for who, v in largest_remainder(totals[key], exact[key]).items()}
        for key in sorted(totals, key=lambda k: (k[0], k[1], k[2] or ""))
    }
