"""Request checks every route shares, run before the route (an app-level dependency).

PostgreSQL text cannot hold a NUL character: a parameter carrying one (``?user=%00``,
``/v1/jobs/%00``) would reach the driver and fail there as a 500. It can name nothing
stored, so it is refused up front as a 422 problem naming the parameter.
"""

from __future__ import annotations

from fastapi import HTTPException, Request

__all__ = ["reject_nul_characters"]


async def reject_nul_characters(request: Request) -> None:  # no IO: no thread hop
    for where, params in (("path", request.path_params), ("query", request.query_params)):
        for name, value in params.items():
            if isinstance(value, str) and "\x00" in value:
                raise HTTPException(422, f"{where}.{name}: contains a NUL character")
