"""``/v1/whoami``: the principal a token stands for, so a client can check its access."""

from __future__ import annotations

from fastapi import APIRouter

from dlc_ledger.api.auth import CurrentPrincipal
from dlc_ledger.api.models import Strict
from dlc_ledger.api.problems import PROBLEM_RESPONSES

__all__ = ["WhoAmI", "router"]

router = APIRouter(prefix="/v1", tags=["access"], responses=PROBLEM_RESPONSES)


class WhoAmI(Strict):
    token_id: str
    name: str
    roles: list[str]
    workspaces: list[str] | None  # None: every workspace (a global role)


@router.get("/whoami", response_model=WhoAmI, summary="The token's principal and scope")
def whoami(principal: CurrentPrincipal) -> WhoAmI:
    scope = principal.scope
    return WhoAmI(
        token_id=principal.token_id,
        name=principal.name,
        roles=list(principal.roles),
        workspaces=None if scope is None else sorted(scope),
    )
