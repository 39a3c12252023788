"""Changing a subscription as use cases: nodes added mid-term, a node count for the
renewal, a change of spec. The CLI (``subscriptions add-nodes|change|change-spec``) and the
API (``POST /v1/subscriptions/{id}/nodes|changes|spec``) both call these.

Each decides on the subscriptions as stored, holding the store's append lock, and appends
its events and transactions in one store transaction expecting the versions it read
(:func:`dlc_ledger.services.subscriptions.orders._decide_and_append`), so a concurrent
cancel or renewal cannot slip in between. Each is idempotent by its key: the event's id
derives from (subscription, key), a retry of the same request returns what the first did
and adds nothing, a different request under a used key is refused (409). The rules are
pure, in :mod:`ledger.subscriptions.changes`; docs/subscriptions.md "Changing a
subscription" states them with an example.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dlc_ledger.services.subscriptions.orders import (
    _booked_until,
    _cancel,
    _decide_and_append,
    _Decision,
    _instant,
    _purchase,
    _version,
)
from ledger.accounts import transaction_envelope
from ledger.bounds import MAX_LABEL_VALUE, MAX_NAME, check_name
from ledger.canonical import format_timestamp
from ledger.envelopes import make_envelope
from ledger.errors import Conflict, Invalid, NotFound
from ledger.events import (
    SubscriptionNodesAdded,
    SubscriptionNodesChangeScheduled,
    SubscriptionSpecChanged,
)
from ledger.ids import deterministic_id
from ledger.store.base import EventStore, UnitOfWork
from ledger.subscriptions import (
    Refund,
    Subscription,
    add_nodes,
    addition_transaction,
    schedule_nodes,
)
from ledger.subscriptions.orders import order_term
from projections.billing import period_locks
from projections.subscriptions import load_specs, load_subscriptions, subscription_stream

__all__ = [
    "NodesAdded",
    "NodesScheduled",
    "SpecChange",
    "add_subscription_nodes",
    "change_rows",
    "change_spec",
    "schedule_subscription_nodes",
]


@dataclass(frozen=True)
class NodesAdded:
    subscription: Subscription
    added: SubscriptionNodesAdded
    created: bool
    dry_run: bool = False


@dataclass(frozen=True)
class NodesScheduled:
    subscription: Subscription
    change: SubscriptionNodesChangeScheduled
    created: bool
    dry_run: bool = False


@dataclass(frozen=True)
class SpecChange:
    old: Subscription
    new: Subscription
    change: SubscriptionSpecChanged
    refund: Refund | None  # None for a retry (the refund was booked by the first)
    created: bool
    dry_run: bool = False


def _key(key: str) -> str:
    if not key.strip():
        raise Invalid("--key must not be empty")
    check_name(key, "key", MAX_NAME)
    return key


def _find(uow: UnitOfWork, subscription_id: str) -> Subscription:
    sub = load_subscriptions(uow).get(subscription_id)
    if sub is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
    return sub


def _not_before_books(uow: UnitOfWork, sub: Subscription, at: datetime, what: str) -> None:
    booked = _booked_until(uow, sub)
    if booked is not None and at < booked:
        raise Conflict(
            f"cannot {what} subscription {sub.subscription_id} at {at.isoformat()}: its "
            f"books already hold {booked.isoformat()} (a day recognised, a term ordered or "
            "a change made); change it at or after then"
        )


def add_subscription_nodes(
    store: EventStore,
    subscription_id: str,
    *,
    nodes: int,
    key: str,
    principal: str,
    at: datetime | None = None,
    dry_run: bool = False,
) -> NodesAdded:
    """Add ``nodes`` nodes to the running term from ``at`` to its end, billed by started
    day at the term's locked price (:func:`ledger.subscriptions.add_nodes`)."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise Invalid(f"--nodes must add a whole number of nodes, at least 1, got {nodes!r}")
    key = _key(key)
    now = _instant(store, at)
    return _decide_and_append(
        store,
        lambda uow: _add(uow, subscription_id, nodes, key, principal, now, at, dry_run),
    )


def _add(
    uow: UnitOfWork,
    subscription_id: str,
    nodes: int,
    key: str,
    principal: str,
    now: datetime,
    at: datetime | None,
    dry_run: bool,
) -> _Decision[NodesAdded]:
    sub = _find(uow, subscription_id)
    for done in sub.additions:
        if done.key != key:
            continue
        # a retry: the same nodes (and the same instant, when one is given) is the same
        # request; without --at the instant defaulted to now, so it is not compared
        if done.nodes != nodes or (at is not None and done.part.starts_at != now):
            raise Conflict(
                f"idempotency key {key!r} added {done.nodes} node(s) to {subscription_id} at "
                f"{done.part.starts_at.isoformat()}; use a new key for another change"
            )
        return NodesAdded(sub, done, created=False), [], {}
    event = add_nodes(sub, nodes, now, key)
    _not_before_books(uow, sub, now, "add nodes to")
    stream = subscription_stream(subscription_id)
    envelope = make_envelope(
        event,
        event_id=deterministic_id("event", "SubscriptionNodesAdded", subscription_id, key),
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=principal,
    )
    after = sub.after(event)
    # dated into a closed month: booked into the open one (ledger.periods)
    txn = addition_transaction(after, event, str(envelope.event_id), locks=period_locks(uow))
    batch = [envelope] + ([transaction_envelope(txn, now, source=principal)] if txn else [])
    if dry_run:
        return NodesAdded(after, event, created=False, dry_run=True), [], {}
    return NodesAdded(after, event, created=True), batch, {stream: _version(uow, stream)}


def schedule_subscription_nodes(
    store: EventStore,
    subscription_id: str,
    *,
    nodes: int,
    principal: str,
    key: str | None = None,
    at: datetime | None = None,
    dry_run: bool = False,
) -> NodesScheduled:
    """Order the next term with ``nodes`` nodes (fewer, or more): applied by the next
    renewal, by hand or automatic; the capacity changes when that term starts."""
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise Invalid(f"--nodes must be a whole number, got {nodes!r}")
    if key is not None:
        key = _key(key)
    now = _instant(store, at)
    return _decide_and_append(
        store,
        lambda uow: _schedule(uow, subscription_id, nodes, key, principal, now, dry_run),
    )


def _schedule(
    uow: UnitOfWork,
    subscription_id: str,
    nodes: int,
    key: str | None,
    principal: str,
    now: datetime,
    dry_run: bool,
) -> _Decision[NodesScheduled]:
    sub = _find(uow, subscription_id)
    scheduled = [c for c in sub.changes if isinstance(c, SubscriptionNodesChangeScheduled)]
    for done in scheduled:
        if key is not None and done.key == key:
            if done.nodes != nodes:
                raise Conflict(
                    f"idempotency key {key!r} scheduled {done.nodes} node(s) for "
                    f"{subscription_id} from term {done.from_term}; use a new key"
                )
            return NodesScheduled(sub, done, created=False), [], {}
    pending = sub.pending_nodes
    if key is None and pending is not None and pending.nodes == nodes:
        return NodesScheduled(sub, pending, created=False), [], {}
    if key is None:  # the request names it: term, count, and which change of the subscription
        key = f"term-{sub.last_term.term + 1}-nodes-{nodes}-change-{len(scheduled) + 1}"
    event = schedule_nodes(sub, nodes, now, key)
    stream = subscription_stream(subscription_id)
    envelope = make_envelope(
        event,
        event_id=deterministic_id(
            "event", "SubscriptionNodesChangeScheduled", subscription_id, key
        ),
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=principal,
    )
    after = sub.after(event)
    if dry_run:
        return NodesScheduled(after, event, created=False, dry_run=True), [], {}
    return NodesScheduled(after, event, created=True), [envelope], {stream: _version(uow, stream)}


def change_spec(
    store: EventStore,
    subscription_id: str,
    *,
    spec: str,
    key: str,
    principal: str,
    group: str | None = None,
    nodes: int | None = None,
    at: datetime | None = None,
    dry_run: bool = False,
) -> SpecChange:
    """Replace the subscription by one of ``spec`` at ``at``, in one store transaction: a
    new subscription (same payer, term unit, auto-renewal; ``nodes`` default the nodes
    held then) at the price in force, into ``group`` (default: the one group that holds
    ``spec`` already), and the old one cancelled immediately with its refund by the
    refund rule. The capacity moves from the old group to the new at ``at``."""
    check_name(spec, "spec", MAX_NAME)
    if group is not None:
        check_name(group, "group", MAX_LABEL_VALUE)
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise Invalid(f"--nodes must be a whole number at least 1, got {nodes!r}")
    key = _key(key)
    now = _instant(store, at)
    return _decide_and_append(
        store,
        lambda uow: _change_spec(
            uow, subscription_id, spec, key, principal, group, nodes, now, at, dry_run
        ),
    )


def _new_group(subs: dict[str, Subscription], old: Subscription, spec: str) -> str:
    holding = sorted({s.group for s in subs.values() if s.spec == spec})
    if len(holding) == 1:
        return holding[0]
    if not holding:
        raise Invalid(
            f"no resource group holds {spec!r} yet: name the group the new nodes join "
            "(--group G; a group holds one spec)"
        )
    raise Invalid(
        f"resource groups {', '.join(holding)} hold {spec!r}: name the one the new nodes "
        "join (--group G)"
    )


def _change_spec(
    uow: UnitOfWork,
    subscription_id: str,
    spec: str,
    key: str,
    principal: str,
    group: str | None,
    nodes: int | None,
    now: datetime,
    at: datetime | None,
    dry_run: bool,
) -> _Decision[SpecChange]:
    subs = load_subscriptions(uow)
    old = subs.get(subscription_id)
    if old is None:
        raise NotFound(f"no subscription {subscription_id!r} (see: subscriptions list)")
    for earlier in old.changes:
        if isinstance(earlier, SubscriptionSpecChanged) and earlier.key == key:
            done = earlier
            same = (
                done.new_spec == spec
                and (group is None or done.new_group == group)
                and (nodes is None or done.nodes == nodes)
                and (at is None or done.effective_at == now)
            )
            if not same:
                raise Conflict(
                    f"idempotency key {key!r} changed {subscription_id} to {done.nodes} x "
                    f"{done.new_spec} in {done.new_group} ({done.new_subscription_id}) at "
                    f"{done.effective_at.isoformat()}; use a new key"
                )
            return SpecChange(old, subs[done.new_subscription_id], done, None, False), [], {}
    if spec == old.spec:
        raise Invalid(
            f"subscription {subscription_id} is of {spec!r} already: to change its nodes, "
            "subscriptions add-nodes or subscriptions change --at-renewal"
        )
    if old.cancelled is not None:
        raise Conflict(
            f"subscription {subscription_id} was already cancelled ({old.cancelled.mode}, "
            f"effective {old.cancelled.effective_at.isoformat()}): buy a new one instead"
        )
    if old.expired is not None or now >= old.ends_at:
        raise Conflict(
            f"subscription {subscription_id} expired at {old.ends_at.isoformat()}: buy a "
            "new one instead"
        )
    target = group if group is not None else _new_group(subs, old, spec)
    count = nodes if nodes is not None else (old.nodes_at(now) or old.nodes)
    specs = load_specs(uow)
    first = order_term(
        specs, spec, old.last_term.unit, count, term=1, starts_at=now, ordered_at=now
    )
    purchase_key = "spec-change-" + str(deterministic_id("spec-change", subscription_id, key))
    order, bought, bought_versions = _purchase(
        uow,
        group=target,
        spec=spec,
        nodes=count,
        workspace=old.workspace,
        principal=principal,
        auto_renew=old.auto_renew,
        key=purchase_key,
        dry_run=False,
        start=now,
        first=first,
        section=specs.section_at(now),
    )
    new = order.subscription
    if not order.created:
        raise Conflict(f"subscription {new.subscription_id} exists already")
    event = SubscriptionSpecChanged(
        subscription_id=subscription_id,
        new_subscription_id=new.subscription_id,
        new_spec=spec,
        new_group=target,
        nodes=count,
        effective_at=now,
        key=key,
    )
    stream = subscription_stream(subscription_id)
    envelope = make_envelope(
        event,
        event_id=deterministic_id("event", "SubscriptionSpecChanged", subscription_id, key),
        stream=stream,
        occurred_at=now,
        observed_at=now,
        source=principal,
    )
    cancellation, cancelled, cancel_versions = _cancel(
        uow,
        subscription_id,
        principal,
        now,
        True,
        f"spec changed to {spec} ({new.subscription_id})",
        False,
    )
    after = cancellation.subscription.after(event)
    answer = SpecChange(
        after, new, event, cancellation.refund, created=not dry_run, dry_run=dry_run
    )
    if dry_run:
        return answer, [], {}
    # the change first on the old stream, then its cancellation: one transaction, the
    # versions read expected (a concurrent cancel or change is refused, not doubled)
    return answer, [*bought, envelope, *cancelled], {**bought_versions, **cancel_versions}


def change_rows(sub: Subscription) -> list[dict[str, Any]]:
    """A subscription's changes, in the order made (``subscriptions show``, the API)."""
    rows: list[dict[str, Any]] = []
    for change in sub.changes:
        if isinstance(change, SubscriptionNodesAdded):
            part = change.part
            rows.append(
                {
                    "change": "add-nodes",
                    "at": format_timestamp(part.starts_at),
                    "nodes": change.nodes,
                    "detail": f"+{change.nodes} node(s) in term {part.term} to "
                    f"{format_timestamp(part.ends_at)} ({change.nodes_after} from then): "
                    f"{change.days} of {change.term_days} day(s)",
                    "amount_minor": part.amount_minor,
                    "currency": sub.currency,
                    "key": change.key,
                }
            )
        elif isinstance(change, SubscriptionNodesChangeScheduled):
            applied = len(sub.terms) >= change.from_term
            state = "applied" if applied else "pending"
            if not applied and sub.pending_nodes != change:
                state = "replaced"
            rows.append(
                {
                    "change": "nodes-at-renewal",
                    "at": format_timestamp(change.requested_at),
                    "nodes": change.nodes,
                    "detail": f"{change.nodes} node(s) from term {change.from_term} ({state})",
                    "amount_minor": 0,
                    "currency": sub.currency,
                    "key": change.key,
                }
            )
        else:
            refund = sub.cancelled.refund_minor if sub.cancelled is not None else 0
            rows.append(
                {
                    "change": "change-spec",
                    "at": format_timestamp(change.effective_at),
                    "nodes": change.nodes,
                    "detail": f"replaced by {change.new_subscription_id}: {change.nodes} x "
                    f"{change.new_spec} in {change.new_group}; this one cancelled, refund "
                    "below",
                    "amount_minor": -refund,
                    "currency": sub.currency,
                    "key": change.key,
                }
            )
    return rows
