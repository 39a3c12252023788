"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) for PATCH requests.

The dispatcher suspends jobs and edits labels with PATCH; the official client sends a dict
body as strategic merge patch, which for the fields kubesim serves behaves as a merge patch,
and a list body as JSON patch.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PatchError", "apply_json_patch", "merge_patch"]


class PatchError(ValueError):
    """A malformed patch document (answered with 422/400)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch and return the result (inputs are not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise PatchError(f"path not found: /{'/'.join(parts)}")
    return node


def apply_json_patch(target: Any, ops: list[Any]) -> Any:
    """Apply RFC 6902 operations add, replace, remove and test."""
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        parts = _pointer(str(op["path"]))
        if not parts:
            raise PatchError("whole-document operations are not supported")
        parent = _parent(doc, parts)
        last = parts[-1]
        kind = op["op"]
        try:
            if kind in ("add", "replace"):
                value = copy.deepcopy(op.get("value"))
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(value)
                    elif kind == "add":
                        parent.insert(int(last), value)
                    else:
                        parent[int(last)] = value
                else:
                    if kind == "replace" and last not in parent:
                        raise PatchError(f"path not found: {op['path']}")
                    parent[last] = value
            elif kind == "remove":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            elif kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if current != op.get("value"):
                    raise PatchError(f"test failed at {op['path']}")
            else:
                raise PatchError(f"unsupported op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(f"cannot apply {op!r}: {exc}") from exc
    return doc
