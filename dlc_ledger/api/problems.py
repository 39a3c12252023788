"""Errors as RFC 9457 problem details (``application/problem+json``), one shape for all.

Every error a route can answer with goes through here: HTTP errors (401, 403, 404, 429
over the rate limit, and 503 when the OIDC key set cannot be fetched), request validation
(422), a use case's refusal by its kind in the one error tree (404 NotFound, 409 Conflict,
503 Unavailable, 400 for the rest; a :class:`~ledger.errors.TimedOut`, a statement
cancelled by the statement timeout, is a 503 with ``Retry-After``) and anything unexpected
(500, without internals in the body).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from ledger.errors import Conflict, LedgerError, NotFound, TimedOut, Unavailable
from ledger.store.failures import as_ledger_error

__all__ = [
    "PROBLEM_RESPONSES",
    "RETRY_AFTER_TIMED_OUT",
    "Problem",
    "install_problem_handlers",
    "problem_response",
]

# a path is logged as %r, its control characters escaped as the access log's are (a URL
# may hold terminal escape sequences)
_LOG = logging.getLogger("dlc_ledger.api")
_MEDIA = "application/problem+json"
#: seconds a client waits after a request that timed out: long enough for a burst that
#: loaded the database to pass, short enough for a dashboard's next refresh
RETRY_AFTER_TIMED_OUT = 5


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None


#: the ``responses=`` every route declares, so the OpenAPI document names the shape
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {_MEDIA: {}}, "description": HTTPStatus(code).phrase}
    for code in (400, 401, 403, 404, 422, 429, 500, 503)
}


def problem_response(
    request: Request, status: int, detail: str | None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = Problem(
        title=HTTPStatus(status).phrase, status=status, detail=detail, instance=request.url.path
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=_MEDIA,
        headers=dict(headers) if headers else None,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else None
    return problem_response(request, exc.status_code, detail, exc.headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return problem_response(request, 422, "; ".join(parts))


#: The one mapping of the error tree (:mod:`ledger.errors`) to HTTP; any other kind
#: (``Invalid``, or one added later) is the client's request: 400.
_STATUS: tuple[tuple[type[LedgerError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (Unavailable, 503),
)


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, TimedOut):
        return _timed_out(request, exc)
    status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 400)
    return problem_response(request, status, str(exc).strip().splitlines()[0])


def _timed_out(request: Request, exc: TimedOut) -> JSONResponse:
    # the operator's sign that a request is too costly (or the database too loaded)
    _LOG.warning("timed out on %s %r: %s", request.method, request.url.path, exc)
    return problem_response(
        request,
        503,
        f"{exc}: the request took longer than this server allows; try again later, "
        "or ask for less (a narrower window, fewer groups)",
        {"Retry-After": str(RETRY_AFTER_TIMED_OUT)},
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    known = as_ledger_error(exc)  # the database's word on the request, as a kind of the tree
    if isinstance(known, TimedOut):
        return _timed_out(request, known)
    if isinstance(known, Unavailable):  # never its address or driver text: the log has them
        _LOG.warning("database unavailable on %s %r: %s", request.method, request.url.path, known)
        return problem_response(request, 503, "the database is unavailable; try again")
    if known is not None:
        return await _refused(request, known)
    # a bug, not the client's request: the traceback goes to the log under an id the
    # client is given, never the internals themselves
    error_id = uuid.uuid4().hex[:12]
    _LOG.exception("unexpected error %s on %s %r", error_id, request.method, request.url.path)
    return problem_response(request, 500, f"internal error {error_id}; see the server log")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(LedgerError, _refused)
    app.add_exception_handler(Exception, _unexpected)
