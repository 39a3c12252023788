"""Label and field selectors, parsed the way the Kubernetes API server reads them.

Watchers narrow their LIST and WATCH calls with selectors, so kubesim must filter the
same way: equality (`=`, `==`, `!=`), existence (`key`, `!key`) and set (`in`, `notin`)
for labels; dotted paths such as `spec.nodeName` or `metadata.name` for fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Matcher", "SelectorError", "parse_field_selector", "parse_label_selector"]

Matcher = Callable[[Mapping[str, Any]], bool]


class SelectorError(ValueError):
    """A selector the server cannot parse (answered with 400 BadRequest)."""


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current.strip())
    return [t for t in terms if t]


_SET_TERM = re.compile(r"^(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")
_EQ_TERM = re.compile(r"^(?P<key>[^\s!=]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s]*)$")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _label_term(term: str) -> Matcher:
    match = _SET_TERM.match(term)
    if match:
        key = match["key"]
        values = {v.strip() for v in match["values"].split(",") if v.strip()}
        if match["op"] == "in":
            return lambda o: _labels(o).get(key) in values
        return lambda o: _labels(o).get(key) not in values
    match = _EQ_TERM.match(term)
    if match:
        key, value = match["key"], match["value"]
        if match["op"] == "!=":
            return lambda o: _labels(o).get(key) != value
        return lambda o: _labels(o).get(key) == value
    if term.startswith("!") and re.fullmatch(r"![^\s!=(),]+", term):
        key = term[1:]
        return lambda o: key not in _labels(o)
    if re.fullmatch(r"[^\s!=(),]+", term):
        return lambda o: term in _labels(o)
    raise SelectorError(f"unable to parse requirement: {term!r}")


def parse_label_selector(text: str | None) -> Matcher:
    """A predicate over objects for a `labelSelector` query value (empty = everything)."""
    if not text:
        return lambda o: True
    terms = [_label_term(t) for t in _split_terms(text)]
    return lambda o: all(t(o) for t in terms)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def _field_term(term: str) -> Matcher:
    match = _EQ_TERM.match(term)
    if not match:
        raise SelectorError(f"invalid field selector: {term!r}")
    path, value = match["key"], match["value"]
    if match["op"] == "!=":
        return lambda o: _field_value(o, path) != value
    return lambda o: _field_value(o, path) == value


def parse_field_selector(text: str | None) -> Matcher:
    """A predicate for a `fieldSelector` (any dotted path; `=`, `==`, `!=`)."""
    if not text:
        return lambda o: True
    terms = [_field_term(t) for t in _split_terms(text)]
    return lambda o: all(t(o) for t in terms)
