"""``/v1/extent``: the span of cluster time the store holds, its clusters, whether they
are a replay's, and the label of the run the server belongs to: where a dashboard opens
(a replay's history lies far from the wall clock) and what it says it shows. Every role
reads it: it names no workspace."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.freshness import with_freshness
from dlc_ledger.api.listing import plain
from dlc_ledger.api.models_finance import Extent
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.presenters import data_extent

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["access"], responses=PROBLEM_RESPONSES)


@router.get(
    "/extent",
    response_model=Extent,
    summary="The cluster time the store holds (first, last), its clusters, replayed or not",
)
def get_extent(request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """``last`` is the cluster clock billing runs observe; ``run`` the label the server
    was started with (``create_app(run_label=…)``), null when none."""
    del principal  # authenticated: every role reads the same answer
    found = data_extent(request.app.state.store)
    body = {
        "first": found.first,
        "last": found.last,
        "replayed": found.replayed,
        "clusters": list(found.clusters),
        "run": request.app.state.run_label,
    }
    return with_freshness(request, plain(body))
