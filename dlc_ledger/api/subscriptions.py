"""``/v1/subscriptions`` and ``/v1/resource-groups``: subscriptions bought, renewed and
cancelled over HTTP, and the resource groups they fill, as ``dlc-ledger subscriptions``
and ``dlc-ledger resource-groups`` do.

Reads are for ``admin``, ``finance`` and ``auditor``; writes for ``admin`` and
``finance`` (403 for the others, workspace tokens included: a subscription is every
workspace's business to finance, not a team's to read or order). A write is the use case
(:mod:`dlc_ledger.services.subscriptions`): it decides on the subscriptions as stored,
appends with the version it read (two cancels cannot both refund: the second is a 409)
and brings every read model to the head before it answers, so the response's
``Ledger-Head-Position`` is a position the caller can read its write at
(``?min_position=``). Events name the caller as ``api/<token name>(<token id>)``.
Instants default to the cluster's now (:func:`billing_instant`), as the CLI's do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from dlc_ledger.api.auth import event_source, require_roles
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import (
    AtQuery,
    CursorQuery,
    Instant,
    LimitQuery,
    listing,
    page_of,
    plain,
)
from dlc_ledger.api.models_subscriptions import (
    AddNodesRequest,
    AddNodesResult,
    CancelRequest,
    CancelResult,
    NodesChangeRequest,
    NodesChangeResult,
    OrderResult,
    PurchaseRequest,
    RenewRequest,
    ResourceGroupDetail,
    ResourceGroupPage,
    SpecChangeRequest,
    SpecChangeResult,
    SubscriptionDetail,
    SubscriptionPage,
    UtilisationRows,
)
from dlc_ledger.api.problems import PROBLEM_RESPONSES, Problem
from dlc_ledger.api.windows import WEIGHED_HOURLY, check_span
from dlc_ledger.presenters import money_fields
from dlc_ledger.services.access import Principal
from dlc_ledger.services.clocks import billing_instant
from dlc_ledger.services.errors import InvalidRequest
from dlc_ledger.services.subscriptions import (
    ResourceGroup,
    add_subscription_nodes,
    cancel,
    change_rows,
    change_spec,
    find_subscription,
    purchase,
    renew,
    resource_group,
    resource_groups,
    schedule_subscription_nodes,
    subscription_report,
    subscription_row,
    subscriptions,
    term_credits,
    term_rows,
)
from ledger.canonical import format_timestamp
from ledger.events import SubscriptionTerm
from ledger.store.base import EventStore
from ledger.subscriptions import Refund, Subscription
from projections.billing import currency_scales
from projections.freshness import read_freshness

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["subscriptions"], responses=PROBLEM_RESPONSES)


class GroupBy(StrEnum):
    group = "group"
    month = "month"
    quota = "quota"
    workspace = "workspace"
    term = "term"


Reader = Annotated[Principal, Depends(require_roles("admin", "finance", "auditor"))]
Writer = Annotated[Principal, Depends(require_roles("admin", "finance"))]

#: a write's refusals besides the reads': the subscription's state forbids it
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "content": {"application/problem+json": {}},
        "description": "Conflict (already cancelled, expired or renewed; a key reused)",
    }
}


def _instant(store: EventStore, at: datetime | None) -> datetime:
    return at if at is not None else billing_instant(store, None).at


def _scale(sub: Subscription) -> Callable[[str], int]:
    return lambda _currency: sub.scale  # locked at purchase, with the currency


def _summary(sub: Subscription, at: datetime) -> dict[str, Any]:
    return money_fields(subscription_row(sub, at), _scale(sub))


def _term(sub: Subscription, term: SubscriptionTerm) -> dict[str, Any]:
    (row,) = [r for r in term_rows(sub) if r["term"] == term.term]
    return money_fields(row, _scale(sub))


def _cancellation(sub: Subscription) -> dict[str, Any] | None:
    done = sub.cancelled
    if done is None:
        return None
    row = {
        "mode": done.mode,
        "effective_at": format_timestamp(done.effective_at),
        "reason": done.reason,
        "no_reason": done.no_reason,
        "rule": done.rule,
        "refund_minor": done.refund_minor,
        "currency": sub.currency,
    }
    return money_fields(row, _scale(sub))


def _refund_terms(sub: Subscription, refund: Refund) -> list[dict[str, Any]]:
    return [
        money_fields(
            {
                "term": t.term,
                "addition": t.addition,
                "paid_minor": t.paid_minor,
                "consumed_minor": t.consumed_minor,
                "refund_minor": t.refund_minor,
                "why": t.why,
                "currency": sub.currency,
            },
            _scale(sub),
        )
        for t in refund.terms
    ]


def _changes(sub: Subscription) -> list[dict[str, Any]]:
    return [money_fields(row, _scale(sub)) for row in change_rows(sub)]


def _written(request: Request, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the freshness after the write: the use case appended and
    brought the read models to the head, so these figures (and the headers) name a
    position the caller's later reads can wait for."""
    with request.app.state.store.snapshot() as uow:
        request.state.freshness = read_freshness(uow)
    return with_freshness(request, plain(document))


def _group_row(group: ResourceGroup) -> dict[str, Any]:
    return {
        "group": group.group,
        "spec": group.spec,
        "subscribed_nodes": group.subscribed_nodes,
        "delivered_nodes": group.delivered_nodes,
        "capacity": dict(sorted(group.capacity.items())),
        "quotas": list(group.quotas),
        "subscriptions": list(group.subscriptions),
    }


@router.get(
    "/subscriptions",
    response_model=SubscriptionPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Every subscription as of an instant (roles admin, finance, auditor)",
)
def get_subscriptions(
    request: Request,
    _principal: Reader,
    at: AtQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """Group, spec, nodes, paying workspace, term, status, price, paid and refunded, as
    of ``at`` (default: the cluster's now), by start then id: ``subscriptions list``."""
    store = request.app.state.store
    when = _instant(store, at)
    rows = [_summary(sub, when) for sub in subscriptions(store)]
    items, following = page_of(rows, limit, cursor)
    return listing(request, items, following, name="subscriptions", fmt=fmt, at=when)


@router.get(
    "/subscriptions/{subscription_id}",
    response_model=SubscriptionDetail,
    response_model_exclude_unset=True,
    summary="One subscription with its terms (roles admin, finance, auditor)",
)
def get_subscription(
    request: Request, _principal: Reader, subscription_id: str, at: AtQuery = None
) -> dict[str, Any]:
    """``subscriptions show``: the subscription as of ``at``, each term at the price
    locked when it was ordered with its SLA credit as of ``at``, and its cancellation
    (null: none)."""
    store = request.app.state.store
    when = _instant(store, at)
    sub = find_subscription(store, subscription_id)
    document = {
        "subscription": _summary(sub, when),
        "terms": [
            money_fields(row, _scale(sub))
            for row in term_rows(sub, term_credits(store, sub.subscription_id, when))
        ],
        "cancellation": _cancellation(sub),
        "changes": _changes(sub),
        "at": when,
    }
    return with_freshness(request, plain(document))


@router.post(
    "/subscriptions",
    response_model=OrderResult,
    status_code=201,
    responses={
        200: {"model": OrderResult, "description": "A repeat of the key, or a dry run"},
        **_CONFLICT,
    },
    summary="Buy nodes into a resource group for a month or a year (roles admin, finance)",
)
def post_subscription(
    request: Request, response: Response, principal: Writer, body: PurchaseRequest
) -> dict[str, Any]:
    """``subscriptions purchase``: billed in full at the order instant. 201 with
    ``Location`` when bought; 200 when ``key`` names the same purchase already made, or
    for a ``dry_run``; 409 for an identical purchase without a key, a key reused for
    another purchase, or a group holding another spec; 404 for an unknown spec; 400 for a
    workspace the ledger does not know (unless ``allow_unknown_workspace``). A dry run
    runs every check the purchase does and answers what it would, a refusal included."""
    store = request.app.state.store
    when = _instant(store, body.at)
    order = purchase(
        store,
        group=body.group,
        spec=body.spec,
        nodes=body.nodes,
        term=body.term,
        workspace=body.workspace,
        principal=event_source(principal),
        auto_renew=body.auto_renew,
        # what the caller gave: a keyed retry without ``at`` is compared without the
        # defaulted start (issue 47), which the service defaults to ``when`` as here
        at=body.at,
        key=body.key,
        dry_run=body.dry_run,
        known_only=not body.allow_unknown_workspace,
    )
    sub = order.subscription
    if order.created:
        response.headers["Location"] = f"/v1/subscriptions/{sub.subscription_id}"
    else:
        response.status_code = 200
    document = {
        "subscription": _summary(sub, when),
        "term": _term(sub, sub.terms[0]),
        "created": order.created,
        "dry_run": order.dry_run,
    }
    return _written(request, document)


@router.post(
    "/subscriptions/{subscription_id}/renew",
    response_model=OrderResult,
    responses=_CONFLICT,
    summary="Order a subscription's next term now (roles admin, finance)",
)
def post_renewal(
    request: Request, principal: Writer, subscription_id: str, body: RenewRequest | None = None
) -> dict[str, Any]:
    """``subscriptions renew``: the next term at the price in force at ``at``, starting
    when the last one ends. 409 when cancelled, expired, or already renewed (the next
    term ordered and not started). No body: renew now."""
    body = body or RenewRequest()
    store = request.app.state.store
    when = _instant(store, body.at)
    order = renew(
        store, subscription_id, principal=event_source(principal), at=when, dry_run=body.dry_run
    )
    sub = order.subscription
    document = {
        "subscription": _summary(sub, when),
        "term": _term(sub, sub.last_term),
        "created": order.created,
        "dry_run": order.dry_run,
    }
    return _written(request, document)


@router.post(
    "/subscriptions/{subscription_id}/cancel",
    response_model=CancelResult,
    responses=_CONFLICT,
    summary="Cancel a subscription, at the term's end or immediately (roles admin, finance)",
)
def post_cancellation(
    request: Request, principal: Writer, subscription_id: str, body: CancelRequest | None = None
) -> dict[str, Any]:
    """``subscriptions cancel``: at the end of the running term (no refund; a renewal
    ordered ahead is refunded in full), or ``immediately`` with the refund rule
    (docs/subscriptions.md): the refund, per term, is in the answer. 409 when already
    cancelled or expired. No body: at the end of the running term."""
    body = body or CancelRequest()
    store = request.app.state.store
    when = _instant(store, body.at)
    done = cancel(
        store,
        subscription_id,
        principal=event_source(principal),
        immediately=body.immediately,
        at=when,
        reason=body.reason,
        dry_run=body.dry_run,
    )
    sub = done.subscription
    document = {
        "subscription": _summary(sub, when),
        "cancellation": _cancellation(sub),
        "refund_terms": _refund_terms(sub, done.refund),
        "dry_run": done.dry_run,
    }
    return _written(request, document)


@router.post(
    "/subscriptions/{subscription_id}/nodes",
    response_model=AddNodesResult,
    status_code=201,
    responses={200: {"model": AddNodesResult, "description": "A retry, or a dry run"}, **_CONFLICT},
    summary="Add nodes to a subscription's running term (roles admin, finance)",
)
def post_nodes(
    request: Request,
    response: Response,
    principal: Writer,
    subscription_id: str,
    body: AddNodesRequest,
) -> dict[str, Any]:
    """``subscriptions add-nodes``: ``nodes`` more from ``at`` to the end of the running
    term, charged by started day at the term's locked price, the group's capacity grown
    at ``at``. 201 when added; 200 for a retry of ``key`` (nothing added) or a dry run;
    409 for the key reused for another request, a subscription cancelled, expired or
    not started, or a next term already ordered."""
    store = request.app.state.store
    when = _instant(store, body.at)
    done = add_subscription_nodes(
        store,
        subscription_id,
        nodes=body.nodes,
        key=body.key,
        principal=event_source(principal),
        at=body.at,
        dry_run=body.dry_run,
    )
    if not done.created:
        response.status_code = 200
    sub = done.subscription
    (row,) = [r for r in _changes(sub) if r["key"] == done.added.key and r["change"] == "add-nodes"]
    document = {
        "subscription": _summary(sub, max(when, done.added.part.starts_at)),
        "change": row,
        "created": done.created,
        "dry_run": done.dry_run,
    }
    return _written(request, document)


@router.post(
    "/subscriptions/{subscription_id}/changes",
    response_model=NodesChangeResult,
    status_code=201,
    responses={
        200: {"model": NodesChangeResult, "description": "A retry, or a dry run"},
        **_CONFLICT,
    },
    summary="Change a subscription's node count at its next renewal (roles admin, finance)",
)
def post_nodes_change(
    request: Request,
    response: Response,
    principal: Writer,
    subscription_id: str,
    body: NodesChangeRequest,
) -> dict[str, Any]:
    """``subscriptions change SUB --nodes M --at-renewal``: the next term ordered (by hand
    or automatically) charges ``nodes`` nodes; the capacity changes when it starts. 201
    when scheduled; 200 for a retry or a dry run; 409 for a key reused for another count,
    or a subscription cancelled or expired."""
    store = request.app.state.store
    when = _instant(store, body.at)
    done = schedule_subscription_nodes(
        store,
        subscription_id,
        nodes=body.nodes,
        principal=event_source(principal),
        key=body.key,
        at=body.at,
        dry_run=body.dry_run,
    )
    if not done.created:
        response.status_code = 200
    sub = done.subscription
    rows = [r for r in _changes(sub) if r["key"] == done.change.key]
    document = {
        "subscription": _summary(sub, when),
        "change": rows[-1],
        "created": done.created,
        "dry_run": done.dry_run,
    }
    return _written(request, document)


@router.post(
    "/subscriptions/{subscription_id}/spec",
    response_model=SpecChangeResult,
    status_code=201,
    responses={
        200: {"model": SpecChangeResult, "description": "A retry, or a dry run"},
        **_CONFLICT,
    },
    summary="Move a subscription to another node spec (roles admin, finance)",
)
def post_spec_change(
    request: Request,
    response: Response,
    principal: Writer,
    subscription_id: str,
    body: SpecChangeRequest,
) -> dict[str, Any]:
    """``subscriptions change-spec``: a new subscription of ``spec`` at the price in force
    and the old one cancelled immediately with its refund by the refund rule, in one store
    transaction; the capacity moves from the old group to the new at ``at``. 201 with
    ``Location`` (the new subscription); 200 for a retry of ``key`` or a dry run; 409 for
    a key reused for another change, a cancelled or expired subscription, or a group
    holding another spec; 404 for a spec not sold."""
    store = request.app.state.store
    done = change_spec(
        store,
        subscription_id,
        spec=body.spec,
        key=body.key,
        principal=event_source(principal),
        group=body.group,
        nodes=body.nodes,
        at=body.at,
        dry_run=body.dry_run,
    )
    old, new = done.old, done.new
    if done.created:
        response.headers["Location"] = f"/v1/subscriptions/{new.subscription_id}"
    else:
        response.status_code = 200
    instant = done.change.effective_at
    document = {
        "old": _summary(old, instant),
        "new": _summary(new, instant),
        "term": _term(new, new.terms[0]),
        "cancellation": _cancellation(old),
        "refund_terms": _refund_terms(old, done.refund) if done.refund is not None else [],
        "created": done.created,
        "dry_run": done.dry_run,
    }
    return _written(request, document)


@router.get(
    "/resource-groups",
    response_model=ResourceGroupPage,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Every resource group: subscribed vs delivered nodes (roles admin, finance, auditor)",
)
def get_resource_groups(
    request: Request,
    _principal: Reader,
    at: AtQuery = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``resource-groups list``: each group bought into or seen on a node, as of ``at``
    (default: the cluster's now), by name."""
    store = request.app.state.store
    when = _instant(store, at)
    rows = [_group_row(g) for g in resource_groups(store, when)]
    items, following = page_of(rows, limit, cursor)
    return listing(request, items, following, name="resource-groups", fmt=fmt, at=when)


@router.get(
    "/resource-groups/{group}",
    response_model=ResourceGroupDetail,
    response_model_exclude_unset=True,
    summary="One resource group (roles admin, finance, auditor)",
)
def get_resource_group(
    request: Request, _principal: Reader, group: str, at: AtQuery = None
) -> dict[str, Any]:
    """``resource-groups show``: one group as in the list, as of ``at``."""
    store = request.app.state.store
    when = _instant(store, at)
    document = {**_group_row(resource_group(store, group, when)), "at": when}
    return with_freshness(request, plain(document))


@router.get(
    "/subscription-utilisation",
    response_model=UtilisationRows,
    response_model_exclude_unset=True,
    responses=CSV_RESPONSES,
    summary="Are we using what we pay for? (roles admin, finance, auditor)",
)
def get_utilisation(
    request: Request,
    _principal: Reader,
    group_by: Annotated[
        GroupBy, Query(description="group, month, quota, workspace or term (SLA).")
    ] = (GroupBy.group),
    start: Annotated[
        Instant | None, Query(alias="from", description="Default: first start.")
    ] = None,
    end: Annotated[
        Instant | None, Query(alias="to", description="Default: the cluster clock.")
    ] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    """``report subscriptions``: subscribed GPU-hours against their use over a window."""
    if start is not None and end is not None and end <= start:
        raise InvalidRequest("to must be after from")
    store = request.app.state.store
    lo = start
    if lo is None:
        bought = subscriptions(store)
        lo = bought[0].starts_at if bought else _instant(store, None)
    hi = end if end is not None else _instant(store, None)
    # weighed hour by hour: capped as its work, not its rows (docs/api.md "Limits")
    check_span(lo, hi, WEIGHED_HOURLY, what="the utilisation report (weighed hourly)")
    rows = subscription_report(store, group_by.value, lo, hi)
    with store.reading() as conn:
        scale_of = currency_scales(conn)
    items, following = page_of([money_fields(r, scale_of) for r in rows], limit, cursor)
    return listing(
        request, items, following, name="subscription-utilisation", fmt=fmt, start=lo, end=hi
    )
