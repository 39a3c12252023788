"""A subscription's state, folded from its events: terms, cancellation, expiry.

Pure: the state is what ``SubscriptionPurchased`` / ``Renewed`` / ``RenewalFailed`` /
``Cancelled`` / ``Expired`` say, in stream order, so every read (list, capacity,
billing, the scheduler's renewals) agrees with a replay of the store. The changes
(``NodesAdded``, ``NodesChangeScheduled``, ``SpecChanged``, docs/subscriptions.md
"Changing a subscription") make the node count a function of time: each term has its own
count (:attr:`Subscription.term_nodes`), nodes added mid-term are parts of their own
(:attr:`Subscription.additions`), and :meth:`Subscription.nodes_at` is what the group
holds at an instant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from ledger.envelopes import EventData
from ledger.events import (
    NodeSpec,
    SubscriptionCancelled,
    SubscriptionExpired,
    SubscriptionNodesAdded,
    SubscriptionNodesChangeScheduled,
    SubscriptionPurchased,
    SubscriptionRenewalFailed,
    SubscriptionRenewed,
    SubscriptionSpecChanged,
    SubscriptionTerm,
)

__all__ = [
    "RELEASE_GRACE",
    "RENEWAL_LEAD",
    "Status",
    "Subscription",
    "fold_subscriptions",
]

#: Auto-renewal orders the next term from this long before expiry.
RENEWAL_LEAD = timedelta(days=3)
#: Expired capacity stops being schedulable at expiry and is released this long after.
RELEASE_GRACE = timedelta(hours=24)

Status = Literal["pending", "active", "cancelling", "cancelled", "expired"]


#: a change of a subscription, as its history shows it
Change = SubscriptionNodesAdded | SubscriptionNodesChangeScheduled | SubscriptionSpecChanged


@dataclass(frozen=True)
class Subscription:
    subscription_id: str
    group: str
    spec: str
    #: the nodes of the last term ordered, with the nodes added to it
    nodes: int
    workspace: str
    currency: str
    scale: int
    node: NodeSpec
    auto_renew: bool
    terms: tuple[SubscriptionTerm, ...]
    key: str | None = None
    cancelled: SubscriptionCancelled | None = None
    expired: SubscriptionExpired | None = None
    renewal_failures: tuple[SubscriptionRenewalFailed, ...] = field(default=())
    #: each term's nodes as ordered (parallel to ``terms``; empty: ``nodes`` for all)
    term_nodes: tuple[int, ...] = field(default=())
    #: nodes added mid-term, each a part co-terminated with its term
    additions: tuple[SubscriptionNodesAdded, ...] = field(default=())
    #: the node count the next term will be ordered with (None: ``nodes``)
    pending_nodes: SubscriptionNodesChangeScheduled | None = None
    #: every change, in stream order (``subscriptions show``)
    changes: tuple[Change, ...] = field(default=())

    @property
    def starts_at(self) -> datetime:
        return self.terms[0].starts_at

    @property
    def last_term(self) -> SubscriptionTerm:
        return self.terms[-1]

    @property
    def ends_at(self) -> datetime:
        """When its capacity stops being schedulable: the cancellation's instant when
        cancelled immediately, else the end of the last paid term that runs."""
        if self.cancelled is not None and self.cancelled.mode == "immediately":
            return self.cancelled.effective_at
        if self.cancelled is not None:
            return self.cancelled.effective_at  # end of the term it was cancelled in
        return self.last_term.ends_at

    @property
    def released_at(self) -> datetime:
        """When its capacity is released (jobs still on it are stopped)."""
        if self.cancelled is not None and self.cancelled.mode == "immediately":
            return self.cancelled.effective_at
        return self.ends_at + RELEASE_GRACE

    def schedulable_at(self, t: datetime) -> bool:
        return self.starts_at <= t < self.ends_at

    def status(self, at: datetime) -> Status:
        if at < self.starts_at:
            return "pending"
        if at >= self.ends_at:
            if self.cancelled is not None and self.cancelled.mode == "immediately":
                return "cancelled"
            return "expired"
        return "cancelling" if self.cancelled is not None else "active"

    def nodes_of(self, term: int) -> int:
        """The nodes term ``term`` was ordered with (nodes added to it not counted)."""
        if not self.term_nodes:
            return self.nodes
        return self.term_nodes[term - 1]

    @property
    def renewal_nodes(self) -> int:
        """The nodes the next term is ordered with: a scheduled change, else the last
        term's nodes with those added to it."""
        return self.pending_nodes.nodes if self.pending_nodes is not None else self.nodes

    def nodes_at(self, t: datetime) -> int:
        """The nodes the subscription holds at ``t`` (its term's, with the additions in
        force by then); 0 outside its schedulable life."""
        if not self.schedulable_at(t):
            return 0
        term = self.term_at(t)
        if term is None:
            return 0
        added = sum(
            a.nodes
            for a in self.additions
            if a.part.term == term.term and a.part.starts_at <= t < a.part.ends_at
        )
        return self.nodes_of(term.term) + added

    def parts(self) -> tuple[tuple[SubscriptionTerm, int, int], ...]:
        """Every paid part: (priced span, nodes, addition number: 0 for a term itself)."""
        terms = tuple((t, self.nodes_of(t.term), 0) for t in self.terms)
        return terms + tuple((a.part, a.nodes, a.addition) for a in self.additions)

    def node_spans(self) -> tuple[tuple[datetime, datetime, int], ...]:
        """(from, to, nodes) over the schedulable life, a span per paid part."""
        end = self.ends_at
        return tuple(
            (p.starts_at, min(p.ends_at, end), nodes)
            for p, nodes, _ in self.parts()
            if min(p.ends_at, end) > p.starts_at
        )

    def term_at(self, t: datetime) -> SubscriptionTerm | None:
        for term in self.terms:
            if term.starts_at <= t < term.ends_at:
                return term
        return None

    def after(self, event: EventData) -> Subscription:
        """This subscription once ``event`` (a later event of its stream) has happened: what
        the fold does, and what a decision expects its own event to make of it."""
        if isinstance(event, SubscriptionRenewed):
            nodes = self.renewal_nodes
            known = self.term_nodes or tuple(self.nodes for _ in self.terms)
            return replace(
                self,
                terms=(*self.terms, event.next),
                renewal_failures=(),
                nodes=nodes,
                term_nodes=(*known, nodes),
                pending_nodes=None,
            )
        if isinstance(event, SubscriptionNodesAdded):
            known = self.term_nodes or tuple(self.nodes for _ in self.terms)
            return replace(
                self,
                nodes=self.nodes + event.nodes,
                term_nodes=known,
                additions=(*self.additions, event),
                changes=(*self.changes, event),
            )
        if isinstance(event, SubscriptionNodesChangeScheduled):
            return replace(self, pending_nodes=event, changes=(*self.changes, event))
        if isinstance(event, SubscriptionSpecChanged):
            return replace(self, changes=(*self.changes, event))
        if isinstance(event, SubscriptionRenewalFailed):
            return replace(self, renewal_failures=(*self.renewal_failures, event))
        if isinstance(event, SubscriptionCancelled):
            return replace(self, cancelled=event, auto_renew=False)
        if isinstance(event, SubscriptionExpired):
            return replace(self, expired=event)
        return self

    def renews(self) -> bool:
        """Whether the scheduler may still order a next term."""
        return self.auto_renew and self.cancelled is None and self.expired is None


def _apply(subs: dict[str, Subscription], event: EventData) -> None:
    if isinstance(event, SubscriptionPurchased):
        subs.setdefault(
            event.subscription_id,
            Subscription(
                subscription_id=event.subscription_id,
                group=event.group,
                spec=event.spec,
                nodes=event.nodes,
                workspace=event.workspace,
                currency=event.currency,
                scale=event.scale,
                node=event.node,
                auto_renew=event.auto_renew,
                terms=(event.first,),
                key=event.key,
            ),
        )
        return
    sub = subs.get(getattr(event, "subscription_id", ""))
    if sub is not None:
        subs[sub.subscription_id] = sub.after(event)


def fold_subscriptions(events: Iterable[EventData]) -> dict[str, Subscription]:
    """Every subscription's state after ``events`` (in store order), by id."""
    subs: dict[str, Subscription] = {}
    for event in events:
        _apply(subs, event)
    return subs
