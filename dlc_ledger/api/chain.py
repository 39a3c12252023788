"""``/v1/chain/verify``: recompute the store's hash chain, as ``dlc-ledger verify``.

Only ``admin`` and ``auditor`` may ask (403 for the others): verification reads every
stored event, every workspace's, and is the auditor's check of the ledger as a whole.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from dlc_ledger.api.auth import require_roles
from dlc_ledger.api.models import Strict
from dlc_ledger.api.problems import PROBLEM_RESPONSES
from dlc_ledger.services.access import Principal

__all__ = ["ChainVerification", "router"]

router = APIRouter(prefix="/v1/chain", tags=["chain"], responses=PROBLEM_RESPONSES)

Verifier = Annotated[Principal, Depends(require_roles("admin", "auditor"))]


class ChainVerification(Strict):
    """``ok``: every event stored when the check began hashes as recorded;
    ``first_break``: the first position that does not (null when ok)."""

    ok: bool
    events_checked: int
    first_break: int | None = None
    detail: str | None = None


@router.get(
    "/verify",
    response_model=ChainVerification,
    summary="Recompute the hash chain (roles admin and auditor)",
)
def verify_chain(request: Request, _principal: Verifier) -> ChainVerification:
    result = request.app.state.store.verify()
    return ChainVerification(
        ok=result.ok,
        events_checked=result.checked,
        first_break=result.broken_at,
        detail=result.detail or None,
    )
