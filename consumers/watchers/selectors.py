"""Client-side evaluation of the label selector the watcher lists and watches with.

The API server sends a DELETED event both when an object is deleted and when it stops matching
the watch's label selector. Only the body tells them apart: a deleted object still matches, one
that left the selector does not. The watcher therefore evaluates its own selector on DELETED
bodies, so an object leaving scope ends its occupancy as ``out-of-scope``, not ``deleted``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LabelSelector"]

_SET = re.compile(r"^(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")
_EQ = re.compile(r"^(?P<key>[^\s!=]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")

Term = Callable[[Mapping[str, str]], bool]


def _split(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    terms.append(current.strip())
    return [t for t in terms if t]


def _term(term: str) -> Term:
    if m := _SET.match(term):
        key, values = m["key"], {v.strip() for v in m["values"].split(",") if v.strip()}
        if m["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ.match(term):
        key, value = m["key"], m["value"]
        if m["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:]
        return lambda labels: key not in labels
    return lambda labels: term in labels


class LabelSelector:
    """``matches(obj)`` for a Kubernetes label selector string (empty matches everything)."""

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self._terms = [_term(t) for t in _split(self.text)]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(term(labels) for term in self._terms)
