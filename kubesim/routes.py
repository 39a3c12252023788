"""Routing a request: discovery, the resource path, and the verb that answers it.

Every request first asks the fault knobs whether it is to fail (:mod:`kubesim.faults`).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from kubesim.listwatch import ListWatchVerbs
from kubesim.protocol import ApiError, status_body
from kubesim.resources import RESOURCES, find_resource
from kubesim.store import NotFound
from kubesim.writes import WriteVerbs

__all__ = ["Handler"]

log = logging.getLogger(__name__)


class Handler(ListWatchVerbs, WriteVerbs):
    """The request handler: the verbs of both mixins behind one router."""

    def _dispatch(self) -> None:
        sim = self.server.sim
        body = self._read_body()
        try:
            if self.path.startswith("/version"):
                sim.wait_for_date()
            failure = sim.take_failure(self.command)
            if failure is not None:
                headers = {}
                if failure.retry_after is not None:
                    headers["Retry-After"] = str(failure.retry_after)
                reason = "TooManyRequests" if failure.status == 429 else "InternalError"
                raise ApiError(failure.status, reason, "injected failure", headers)
            self._route(body)
        except ApiError as err:
            self._send_json(err.code, err.body, err.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # pragma: no cover - surfaced to the client as 500
            log.exception("kubesim request failed")
            self._send_json(500, status_body(500, "InternalError", repr(exc)))

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _dispatch

    # -- routing ---------------------------------------------------------------------------

    def _route(self, body: bytes) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        method = self.command
        if method == "GET" and self._discovery(parts):
            return
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 2:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        res = find_resource(group, version, rest[0])
        if res is None:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        name = rest[1] if len(rest) == 2 else None
        if res.namespaced and name is not None and namespace is None:
            raise ApiError(404, "NotFound", "namespace required")
        ns = namespace or ""
        query = self._query()
        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1", "True"):
                    self._watch(res, namespace, query)
                else:
                    self._list(res, namespace, query)
            elif method == "POST":
                self._create(res, ns, body)
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} not allowed on a collection")
            return
        cluster = self.server.sim.cluster
        try:
            if method == "GET":
                self._send_json(200, cluster.store.get(res, ns, name))
            elif method == "PATCH":
                self._patch(res, ns, name, body)
            elif method == "PUT":
                self._replace(res, ns, name, body)
            elif method == "DELETE":
                self._delete(res, ns, name, body, query)
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} not allowed")
        except NotFound as exc:
            raise ApiError(
                404,
                "NotFound",
                f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found',
            ) from exc

    def _discovery(self, parts: list[str]) -> bool:
        if parts == ["version"]:
            self._send_json(
                200,
                {
                    "major": "1",
                    "minor": "31",
                    "gitVersion": "v1.31.0-kubesim",
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.22.0",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                },
            )
        elif parts in (["healthz"], ["readyz"], ["livez"]):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif parts == ["api"]:
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                    ],
                },
            )
        elif parts == ["apis"]:
            groups: dict[str, set[str]] = {}
            for res in RESOURCES:
                if res.group:
                    groups.setdefault(res.group, set()).add(res.version)
            self._send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": g,
                            "versions": [
                                {"groupVersion": f"{g}/{v}", "version": v} for v in sorted(vs)
                            ],
                            "preferredVersion": {
                                "groupVersion": f"{g}/{sorted(vs)[0]}",
                                "version": sorted(vs)[0],
                            },
                        }
                        for g, vs in sorted(groups.items())
                    ],
                },
            )
        elif (parts[:1] == ["api"] and len(parts) == 2) or (
            parts[:1] == ["apis"] and len(parts) == 3
        ):
            group = "" if parts[0] == "api" else parts[1]
            version = parts[-1]
            found = [r for r in RESOURCES if r.group == group and r.version == version]
            if not found:
                return False
            self._send_json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": found[0].api_version,
                    "resources": [
                        {
                            "name": r.plural,
                            "singularName": r.kind.lower(),
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "shortNames": list(r.short_names),
                            "verbs": [
                                "create",
                                "delete",
                                "get",
                                "list",
                                "patch",
                                "update",
                                "watch",
                            ],
                        }
                        for r in found
                    ],
                },
            )
        else:
            return False
        return True
