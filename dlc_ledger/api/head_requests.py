"""HEAD on every GET route: the GET's answer, headers only (RFC 9110 §9.3.2).

FastAPI's routes answer only the methods they declare, so a ``HEAD /v1/jobs`` would be a
405 while ``GET`` answers. Rather than declare HEAD on each route (and in the OpenAPI
document), this shim, outside the router, hands the app a HEAD request as a GET and sends
the client the GET's status and headers (``Content-Length`` included) without its body.
Being pure ASGI, it keeps the response's streaming: the body is dropped as it comes.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGet"]

_FILE_SENDING = frozenset({"http.response.pathsend", "http.response.zerocopysend"})


class HeadAsGet:
    """Answers ``HEAD`` as ``GET`` without the body, for every route of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
            elif not message.get("more_body", False):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        # the state dict stays shared; no extension that would have the server send a file
        # itself (a body this shim could not drop)
        extensions = {
            name: value
            for name, value in scope.get("extensions", {}).items()
            if name not in _FILE_SENDING
        }
        as_get = {**scope, "method": "GET", "extensions": extensions}
        try:
            await self.app(as_get, receive, headers_only)
        finally:
            # the route the router matched, for the metrics outside (their label)
            if "route" in as_get:
                scope["route"] = as_get["route"]
