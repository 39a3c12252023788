"""The write verbs of the API server: POST, merge / JSON PATCH, PUT and (graceful) DELETE.

Each goes through :class:`kubesim.cluster.Cluster`, which applies what the controllers would
(owner cascades, graceful deletion on the virtual clock) and notifies the watches.
"""

from __future__ import annotations

from kubesim.patches import PatchError, apply_json_patch, merge_patch
from kubesim.protocol import ApiError, HandlerBase, status_body
from kubesim.resources import ResourceType
from kubesim.store import Conflict, Object

__all__ = ["WriteVerbs"]


class WriteVerbs(HandlerBase):
    """Create, patch, replace and delete one object."""

    def _create(self, res: ResourceType, namespace: str, body: bytes) -> None:
        obj = self._parse(body)
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiError(
                    400, "BadRequest", "the namespace of the object does not match the path"
                )
            meta["namespace"] = namespace
        for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(key, None)
        try:
            created = self.server.sim.cluster.create(res, obj)
        except Conflict as exc:
            raise ApiError(409, "AlreadyExists", str(exc)) from exc
        except ValueError as exc:
            raise ApiError(422, "Invalid", str(exc)) from exc
        self._send_json(201, created)

    def _patch(self, res: ResourceType, namespace: str, name: str, body: bytes) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch = self._parse(body)
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise ApiError(400, "BadRequest", "a JSON patch must be a list")
        elif content_type in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/json",
        ):
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be an object")
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        precondition = (
            (patch.get("metadata") or {}).get("resourceVersion")
            if isinstance(patch, dict)
            else None
        )

        def mutate(obj: Object) -> Object:
            if precondition is not None and str(precondition) != obj["metadata"]["resourceVersion"]:
                raise Conflict(
                    "the object has been modified; please apply your changes to the latest version"
                )
            if isinstance(patch, list):
                result: Object = apply_json_patch(obj, patch)
                return result
            patched: Object = merge_patch(obj, patch)
            return patched

        try:
            updated = self.server.sim.cluster.update(res, namespace, name, mutate)
        except PatchError as exc:
            raise ApiError(422, "Invalid", str(exc)) from exc
        except Conflict as exc:
            raise ApiError(409, "Conflict", str(exc)) from exc
        self._send_json(200, updated)

    def _replace(self, res: ResourceType, namespace: str, name: str, body: bytes) -> None:
        obj = self._parse(body)
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        wanted = (obj.get("metadata") or {}).get("resourceVersion")

        def mutate(current: Object) -> Object:
            if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
                raise Conflict(
                    "the object has been modified; please apply your changes to the latest version"
                )
            return obj

        try:
            updated = self.server.sim.cluster.update(res, namespace, name, mutate)
        except Conflict as exc:
            raise ApiError(409, "Conflict", str(exc)) from exc
        self._send_json(200, updated)

    def _delete(
        self, res: ResourceType, namespace: str, name: str, body: bytes, query: dict[str, str]
    ) -> None:
        options = self._parse(body) or {}
        if not isinstance(options, dict):
            options = {}
        grace = self._int(query, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
        result = self.server.sim.cluster.delete(res, namespace, name, grace, propagation)
        if res.kind == "Pod":
            self._send_json(200, result)
        else:
            details = {"name": name, "kind": res.plural, "uid": result["metadata"]["uid"]}
            if res.group:
                details["group"] = res.group
            self._send_json(200, status_body(200, "", "", details) | {"status": "Success"})
