"""SLA credits: subscribed node-time the cluster did not deliver, credited per term.

Pure (docs/subscriptions.md, "SLA credits"). The inputs are the watcher's node facts
(``NodeRegistered``, ``NodeCordoned``, ``NodeRemoved``) and the subscriptions; the rules:

- A node **delivers** to its resource group (``NodeRegistered.resource_group``) from its
  registration until it is cordoned or removed (or re-registered into another group); an
  uncordon delivers again. The watcher records no readiness, so a registered, uncordoned
  node counts as delivered. Any node in the group counts as one node of the group's spec.
- A group's **subscribed** nodes at an instant are its schedulable subscriptions' nodes;
  its **shortfall** is ``max(0, subscribed - delivered)``, exact to the microsecond.
- **Grace**: an *undelivered interval* of level ``k`` is a maximal interval during which
  the group is short by at least ``k`` nodes. It counts, in full, when it lasts at least
  the spec's ``grace_minutes`` (the grace in the book the term was priced from); one
  shorter is not counted at all. A long outage of one node and a short blip of a second
  during it: the first counts, the blip does not.
- **Sharing**: a group's counted shortfall is borne by its subscriptions in reverse order
  of purchase: the delivered nodes serve the subscriptions in the order they were bought
  (first term's order instant, then id), so the latest purchase is short first. Node
  counts stay whole: no subscription is credited a fraction of a node.
- **Credit** of a term: its undelivered node-seconds x the term's node-hour price, i.e.
  ``round_half_even(undelivered_node_us x unit_price_minor / term_us)`` where ``term_us``
  is the whole term's length; never above what the term kept after a refund, never
  negative. The term's service ends at its end or at an immediate cancellation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Literal

from ledger.envelopes import EventData
from ledger.events import (
    NodeCordoned,
    NodeRegistered,
    NodeRemoved,
    SubscriptionTerm,
)
from ledger.money import to_minor
from ledger.subscriptions.model import Subscription
from ledger.subscriptions.refunds import refund_of
from ledger.subscriptions.specs import SpecSchedule

__all__ = [
    "NODE_FACT_TYPES",
    "NodeState",
    "TermDelivery",
    "count_changes",
    "credit_minor",
    "creditable_minor",
    "node_states",
    "nodes_at",
    "purchase_order",
    "term_deliveries",
    "us",
]

NODE_FACT_TYPES = ("NodeRegistered", "NodeCordoned", "NodeRemoved")
_US = timedelta(microseconds=1)

State = Literal["delivered", "cordoned", "removed"]


def us(span: timedelta) -> int:
    """A duration in whole microseconds (instants are microsecond-exact)."""
    return span // _US


@dataclass(frozen=True)
class NodeState:
    """One node in one state in one group over ``[start, end)`` (``end`` None: still)."""

    node: str
    group: str
    state: State
    start: datetime
    end: datetime | None


@dataclass
class _Node:
    group: str
    state: State
    since: datetime


def node_states(facts: Iterable[tuple[datetime, EventData]]) -> list[NodeState]:
    """The states of every node from its facts (instant, payload) in store order.

    As the inventory reads them (projections/inventory): a cordon or removal of a node
    never registered is ignored; a re-registration keeps the cordon state (after a
    removal it delivers anew); a fact stamped before the node's current state began is
    taken to happen at that state's start, so intervals never run backwards."""
    out: list[NodeState] = []
    nodes: dict[str, _Node] = {}

    def move(name: str, cur: _Node, at: datetime, group: str, state: State) -> None:
        if at > cur.since:
            out.append(NodeState(name, cur.group, cur.state, cur.since, at))
        cur.group, cur.state, cur.since = group, state, at

    for when, fact in facts:
        name = getattr(fact, "node", None)
        if name is None:
            continue
        cur = nodes.get(name)
        at = when if cur is None else max(when, cur.since)
        if isinstance(fact, NodeRegistered):
            if cur is None:
                nodes[name] = _Node(fact.resource_group, "delivered", at)
            elif cur.state == "removed":
                move(name, cur, at, fact.resource_group, "delivered")
            elif cur.group != fact.resource_group:
                move(name, cur, at, fact.resource_group, cur.state)
        elif cur is None or cur.state == "removed":
            continue
        elif isinstance(fact, NodeCordoned):
            state: State = "cordoned" if fact.cordoned else "delivered"
            if state != cur.state:
                move(name, cur, at, cur.group, state)
        elif isinstance(fact, NodeRemoved):
            move(name, cur, at, cur.group, "removed")
    for name, cur in nodes.items():
        out.append(NodeState(name, cur.group, cur.state, cur.since, None))
    return out


def count_changes(sub: Subscription) -> tuple[datetime, ...]:
    """The instants at which ``sub``'s subscribed node count may change: its start and
    end, each term's start (a count changed at the renewal) and each addition's
    (nodes added mid-term: docs/subscriptions.md "Changing a subscription")."""
    starts = (t.starts_at for t in sub.terms[1:])
    added = (a.part.starts_at for a in sub.additions)
    return (sub.starts_at, sub.ends_at, *starts, *added)


def nodes_at(sub: Subscription, t: datetime) -> int:
    """``sub``'s subscribed nodes at ``t``: its term's, with the nodes added by then, while
    schedulable, else 0 (:meth:`Subscription.nodes_at`)."""
    return sub.nodes_at(t)


def purchase_order(sub: Subscription) -> tuple[datetime, str]:
    """The order in which a group's delivered nodes serve its subscriptions."""
    return (sub.terms[0].ordered_at, sub.subscription_id)


@dataclass
class TermDelivery:
    """One term's delivery up to an instant: node-microseconds subscribed, short (every
    shortfall) and undelivered (the shortfall counted beyond the grace, credited)."""

    subscription_id: str
    term: SubscriptionTerm
    nodes: int
    starts_at: datetime
    ends_at: datetime  # the service's end, or the instant asked when before it
    grace_minutes: int | None  # None: the term's book states no commitment
    subscribed_us: int = 0
    short_us: int = 0
    undelivered_us: int = 0
    down_nodes: dict[tuple[str, str], int] = field(default_factory=dict)  # (node, state)

    @property
    def delivered_us(self) -> int:
        return self.subscribed_us - self.short_us


def _service_end(sub: Subscription, term: SubscriptionTerm) -> datetime:
    return min(term.ends_at, sub.ends_at)


def _counted(times: Sequence[datetime], short: Sequence[int], grace: timedelta) -> list[int]:
    """Per segment ``[times[i], times[i+1])``, the shortfall levels that count: level k
    counts where the maximal run short by >= k nodes lasts at least ``grace``."""
    counted = [0] * len(short)
    if grace <= timedelta(0):
        return list(short)
    for level in sorted({s for s in short if s > 0}):
        i = 0
        while i < len(short):
            if short[i] < level:
                i += 1
                continue
            j = i
            while j < len(short) and short[j] >= level:
                j += 1
            if times[j] - times[i] >= grace:
                for k in range(i, j):
                    counted[k] = level  # levels rise: the last that counts is the highest
            i = j
    return counted


def _allocate(active: Sequence[tuple[str, int]], short: int) -> dict[str, int]:
    """A segment's shortfall borne by its subscriptions ((id, nodes) in purchase order),
    the latest purchased first."""
    out: dict[str, int] = {}
    for sub_id, nodes in reversed(active):
        if short <= 0:
            break
        mine = min(nodes, short)
        out[sub_id] = mine
        short -= mine
    return out


def term_deliveries(
    subs: Iterable[Subscription],
    states: Sequence[NodeState],
    specs: SpecSchedule,
    until: datetime,
) -> list[TermDelivery]:
    """Every term's delivery (service started before ``until``) up to ``until``."""
    by_group: dict[str, list[Subscription]] = defaultdict(list)
    for sub in subs:
        by_group[sub.group].append(sub)
    group_states: dict[str, list[NodeState]] = defaultdict(list)
    for st in states:
        if st.group in by_group:
            group_states[st.group].append(st)
    out: list[TermDelivery] = []
    for group in sorted(by_group):
        out.extend(
            _group(sorted(by_group[group], key=purchase_order), group_states[group], specs, until)
        )
    return out


def _group(
    subs: list[Subscription], states: list[NodeState], specs: SpecSchedule, until: datetime
) -> list[TermDelivery]:
    lo = min(s.starts_at for s in subs)
    hi = until
    deliveries: list[TermDelivery] = []
    for sub in subs:
        for term in sub.terms:
            end = min(_service_end(sub, term), hi)
            if term.starts_at >= end:
                continue
            sla = specs.sla_of(sub.spec, term.book_id, term.ordered_at)
            deliveries.append(
                TermDelivery(
                    sub.subscription_id,
                    term,
                    sub.nodes_of(term.term),
                    term.starts_at,
                    end,
                    None if sla is None else sla.grace_minutes,
                )
            )
    if not deliveries or hi <= lo:
        return deliveries
    points = {lo, hi}
    for sub in subs:
        points.update(t for t in count_changes(sub) if lo < t < hi)
    for st in states:
        points.update(t for t in (st.start, st.end) if t is not None and lo < t < hi)
    times = sorted(points)
    segments = len(times) - 1
    # delivered nodes and the down nodes per segment, swept from the node states
    delivered = [0] * segments
    starts: dict[datetime, list[NodeState]] = defaultdict(list)
    for st in states:
        if st.start < hi and (st.end is None or st.end > lo):
            starts[max(st.start, lo)].append(st)
    active_nodes: dict[int, NodeState] = {}
    down: list[tuple[NodeState, ...]] = []
    for i in range(segments):
        t = times[i]
        for gone in [k for k, st in active_nodes.items() if st.end is not None and st.end <= t]:
            del active_nodes[gone]
        for st in starts.get(t, ()):
            active_nodes[id(st)] = st
        delivered[i] = sum(1 for st in active_nodes.values() if st.state == "delivered")
        down.append(tuple(st for st in active_nodes.values() if st.state != "delivered"))
    actives = [
        [(s.subscription_id, n) for s in subs if (n := nodes_at(s, times[i])) > 0]
        for i in range(segments)
    ]
    subscribed = [sum(n for _, n in a) for a in actives]
    count = [dict(a) for a in actives]
    short = [max(0, subscribed[i] - delivered[i]) for i in range(segments)]
    graces = {d.grace_minutes for d in deliveries if d.grace_minutes is not None}
    counted = {g: _counted(times, short, timedelta(minutes=g)) for g in graces}
    raw = [_allocate(actives[i], short[i]) for i in range(segments)]
    shares = {g: [_allocate(actives[i], c[i]) for i in range(segments)] for g, c in counted.items()}
    for d in deliveries:
        for i in range(segments):
            a, b = max(times[i], d.starts_at), min(times[i + 1], d.ends_at)
            if a >= b:
                continue
            span = us(b - a)
            d.subscribed_us += count[i].get(d.subscription_id, 0) * span
            d.short_us += raw[i].get(d.subscription_id, 0) * span
            if d.grace_minutes is None:
                continue
            mine = shares[d.grace_minutes][i].get(d.subscription_id, 0)
            if mine:
                d.undelivered_us += mine * span
                for st in down[i]:
                    key = (st.node, st.state)
                    d.down_nodes[key] = d.down_nodes.get(key, 0) + span
    return deliveries


def creditable_minor(sub: Subscription, term: SubscriptionTerm) -> int:
    """What ``term`` kept of its price (with the nodes added to it): its amount less what
    a cancellation refunded."""
    paid = term.amount_minor + sum(
        a.part.amount_minor for a in sub.additions if a.part.term == term.term
    )
    cancelled = sub.cancelled
    if cancelled is None or cancelled.mode != "immediately":
        return paid
    refund = refund_of(sub, cancelled.effective_at, no_reason_available=cancelled.no_reason)
    refunded = sum(t.refund_minor for t in refund.terms if t.term == term.term)
    return max(0, paid - refunded)


def credit_minor(sub: Subscription, delivery: TermDelivery) -> int:
    """The term's SLA credit in minor units: undelivered node-time at its node-hour price,
    rounded half-even once, capped at what the term kept."""
    term = delivery.term
    if delivery.grace_minutes is None or delivery.undelivered_us <= 0:
        return 0
    unit_minor = to_minor(Decimal(term.unit_price), sub.scale)
    term_us = us(term.ends_at - term.starts_at)
    amount = round(Fraction(delivery.undelivered_us * unit_minor, term_us))
    return max(0, min(amount, creditable_minor(sub, term)))
