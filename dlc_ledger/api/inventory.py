"""``/v1/inventory``: nodes and schedulable capacity per group, as ``report inventory``.

The cluster's capacity is not any team's secret (the scheduler shows it to everyone who
submits, and a team lead needs it to read their quota's figures), and no inventory row
carries a workspace: every role, a ``workspace:<id>`` token included, reads the same
rows (docs/api.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.csv_responses import CSV_RESPONSES, FormatQuery
from dlc_ledger.api.listing import (
    AtQuery,
    CursorQuery,
    LimitQuery,
    listed_report,
)
from dlc_ledger.api.models_billing import InventoryPage
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from projections.inventory import INVENTORY_GROUP_KEYS, capacity_at

__all__ = ["router"]

router = APIRouter(
    prefix="/v1", tags=["inventory"], responses={**PROBLEM_RESPONSES, **CSV_RESPONSES}
)


@router.get(
    "/inventory",
    response_model=InventoryPage,
    response_model_exclude_unset=True,
    summary="Nodes and schedulable capacity (cordoned and removed excluded), per group",
)
def get_inventory(
    request: Request,
    _principal: CurrentPrincipal,
    at: AtQuery = None,
    group_by: Annotated[
        str, Query(description=f"Comma-separated, of: {', '.join(INVENTORY_GROUP_KEYS)}.")
    ] = "pool",
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    fmt: FormatQuery = None,
) -> dict[str, Any] | Response:
    keys = [k.strip() for k in group_by.split(",") if k.strip()]
    return listed_report(
        request,
        lambda conn: capacity_at(conn, at, keys),
        name="inventory",
        limit=limit,
        cursor=cursor,
        fmt=fmt,
    )
