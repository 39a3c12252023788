"""Every read says how current it is, and may wait (bounded) for a position.

Reads never project: a response shows the read models as the projector left them. Each
``/v1`` response carries ``Ledger-Head-Position``, ``Ledger-Projected-Position`` and
``Ledger-Behind`` (events not yet projected), and every page's JSON body a ``freshness``
object with the same figures. ``?min_position=P`` (with ``wait``, seconds, default 5, at
most 30) first waits until every read model has projected ``P``: read-your-writes for a
client that knows the position of its write; 503 when they have not by then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Query, Request

from projections.freshness import Freshness, read_freshness, wait_for_position

__all__ = ["freshness_body", "freshness_values", "track_freshness", "with_freshness"]


def track_freshness(
    request: Request,
    min_position: Annotated[
        int | None,
        Query(
            ge=0,
            le=2**63 - 1,
            description="Wait until every read model has projected this store position.",
        ),
    ] = None,
    wait: Annotated[
        float,
        Query(ge=0, le=30, description="The longest ``min_position`` waits, in seconds."),
    ] = 5.0,
) -> None:
    store = request.app.state.store
    if store is None:
        return
    if min_position is not None:
        seen = wait_for_position(store, min_position, wait)
    else:
        with store.snapshot() as uow:
            seen = read_freshness(uow)
    request.state.freshness = seen


def freshness_body(request: Request) -> dict[str, int] | None:
    """The ``freshness`` object of a page's body (None before the dependency ran)."""
    seen: Freshness | None = getattr(request.state, "freshness", None)
    if seen is None:
        return None
    return {"head": seen.head, "projected": seen.projected, "behind": seen.behind}


def freshness_values(state: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The three headers, for a request the dependency saw (``state``: its ASGI scope's
    ``state``); none for one it did not."""
    seen: Freshness | None = state.get("freshness")
    if seen is None:
        return []
    return [
        ("Ledger-Head-Position", str(seen.head)),
        ("Ledger-Projected-Position", str(seen.projected)),
        ("Ledger-Behind", str(seen.behind)),
    ]


def with_freshness(request: Request, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a route's JSON body) with its ``freshness`` object."""
    fresh = freshness_body(request)
    return document if fresh is None else {**document, "freshness": fresh}
