"""``/v1/notifications``: the event centre's rules and deliveries over HTTP.

Reads are scoped like every route: a workspace token sees its workspaces' rules and
deliveries, a global role all. Writes (create or replace a rule with ``PUT``, delete it
with ``DELETE``) are for admins, and for a workspace token on its own workspaces; finance
and auditors read only. ``PUT`` is idempotent: the same rule again stores nothing. A rule
names where its secret comes from (an environment variable of the sender), never the
secret, and only a variable an admin granted to its workspace (``/secrets``: admins grant
and revoke, a workspace token sees its own grants; docs/notifications.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal, event_source
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import CursorQuery, Instant, LimitQuery, listing, page_of, plain
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.services.access import Principal
from dlc_ledger.services.errors import InvalidRequest
from dlc_ledger.services.notifications import (
    GrantChanged,
    delivery_rows,
    grant_rows,
    grant_secret,
    remove_rule,
    revoke_secret,
    rule_rows,
    set_rule,
)
from projections.notifications import DELIVERY_STATUSES

__all__ = ["router"]

router = APIRouter(prefix="/v1/notifications", tags=["notifications"], responses=PROBLEM_RESPONSES)


def _may_manage(principal: Principal, workspace: str) -> bool:
    if "admin" in principal.roles:
        return True
    return workspace != "*" and workspace in principal.workspaces


def _check_writer(principal: Principal, workspace: str) -> None:
    if not _may_manage(principal, workspace):
        raise HTTPException(
            403,
            "a rule is managed by an admin, or by a workspace token of its workspace; "
            "finance and auditors read only",
        )


def _visible(principal: Principal, workspace: str) -> bool:
    scope = principal.scope
    return scope is None or workspace in scope


def _scoped_page(
    request: Request,
    principal: Principal,
    rows: Sequence[dict[str, Any]],
    limit: int,
    cursor: str | None,
    fmt: Any,
    name: str,
) -> dict[str, Any] | Response:
    """One page of the rows of the workspaces ``principal`` may see."""
    visible = [r for r in rows if _visible(principal, r["workspace"])]
    items, following = page_of(visible, limit, cursor)
    return listing(request, items, following, name=name, fmt=fmt)


@router.get(
    "/rules", response_model=None, responses=CSV_RESPONSES, summary="The rules as applied (scoped)"
)
def get_rules(
    request: Request,
    principal: CurrentPrincipal,
    workspace: Annotated[str | None, Query(description="Only this workspace.")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    rows = rule_rows(request.app.state.store, workspace)
    return _scoped_page(request, principal, rows, limit, cursor, fmt, "notification-rules")


@router.get(
    "/deliveries",
    response_model=None,
    responses=CSV_RESPONSES,
    summary="Recent notifications (scoped)",
)
def get_deliveries(
    request: Request,
    principal: CurrentPrincipal,
    status: Annotated[str | None, Query(description="queued, delivered or failed.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    if status is not None and status not in DELIVERY_STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(DELIVERY_STATUSES)}")
    rows = delivery_rows(
        request.app.state.store, status=status, workspaces=principal.scope, limit=limit
    )
    return listing(request, rows, None, name="notification-deliveries", fmt=fmt)


@router.put("/rules/{workspace}/{name}", summary="Create or replace a rule (admin, its workspace)")
def put_rule(
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    workspace: str,
    name: str,
    body: Annotated[
        dict[str, Any], Body(description="A rule as in a rule file, without name and workspace.")
    ],
    effective_at: Annotated[Instant | None, Query(description="Default: now.")] = None,
    dry_run: Annotated[bool, Query(description="Say what would change; store nothing.")] = False,
) -> dict[str, Any]:
    _check_writer(principal, workspace)
    store = request.app.state.store
    existed = any(r["name"] == name for r in rule_rows(store, workspace))
    result = set_rule(
        store,
        workspace,
        name,
        body,
        principal=event_source(principal),
        at=effective_at,
        admin="admin" in principal.roles,
        dry_run=dry_run,
        allow=request.app.state.webhook_allow,
    )
    if not existed and not dry_run:
        response.status_code = 201
    rules = [r for r in rule_rows(store, workspace) if r["name"] == name]
    document = {"rule": rules[0] if rules else None, "changes": result.lines, "dry_run": dry_run}
    return with_freshness(request, plain(document))


@router.delete("/rules/{workspace}/{name}", summary="Delete a rule (admin, its workspace)")
def delete_rule(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str,
    name: str,
    effective_at: Annotated[Instant | None, Query(description="Default: now.")] = None,
    dry_run: Annotated[bool, Query(description="Say what would change; store nothing.")] = False,
) -> dict[str, Any]:
    _check_writer(principal, workspace)
    result = remove_rule(
        request.app.state.store,
        workspace,
        name,
        principal=event_source(principal),
        at=effective_at,
        dry_run=dry_run,
    )
    return with_freshness(request, plain({"changes": result.lines, "dry_run": dry_run}))


def _grant_change(
    request: Request,
    principal: Principal,
    change: Callable[..., GrantChanged],
    workspace: str,
    variable: str,
    dry_run: bool,
) -> dict[str, Any]:
    """A grant or a revoke, an admin's alone, and its answer."""
    if "admin" not in principal.roles:
        raise HTTPException(403, "secret grants are managed by an admin")
    changed = change(
        request.app.state.store,
        workspace,
        variable,
        principal=event_source(principal),
        dry_run=dry_run,
    )
    return with_freshness(request, plain({"changes": [changed.line], "dry_run": dry_run}))


@router.get(
    "/secrets",
    response_model=None,
    responses=CSV_RESPONSES,
    summary="Which sender variables each workspace's rules may name (scoped)",
)
def get_grants(
    request: Request,
    principal: CurrentPrincipal,
    workspace: Annotated[str | None, Query(description="Only this workspace.")] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    rows = grant_rows(request.app.state.store, workspace)
    return _scoped_page(request, principal, rows, limit, cursor, fmt, "notification-secrets")


@router.put(
    "/secrets/{workspace}/{variable}",
    summary="Let a workspace's rules name a sender variable (admin)",
)
def put_grant(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str,
    variable: str,
    dry_run: Annotated[bool, Query(description="Say what would change; store nothing.")] = False,
) -> dict[str, Any]:
    return _grant_change(request, principal, grant_secret, workspace, variable, dry_run)


@router.delete(
    "/secrets/{workspace}/{variable}",
    summary="Take a sender variable back from a workspace (admin)",
)
def delete_grant(
    request: Request,
    principal: CurrentPrincipal,
    workspace: str,
    variable: str,
    dry_run: Annotated[bool, Query(description="Say what would change; store nothing.")] = False,
) -> dict[str, Any]:
    return _grant_change(request, principal, revoke_secret, workspace, variable, dry_run)
