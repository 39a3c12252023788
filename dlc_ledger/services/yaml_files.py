"""YAML as operators write it (quota trees, price books): one loader for both, at the edge.

The domain (:mod:`ledger.quotas`, :mod:`ledger.prices`) validates parsed documents and
never reads YAML or files; this module reads them. PyYAML keeps the last of two equal
keys in a mapping without a word; the loader refuses a repeated key instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ledger.errors import Invalid
from ledger.prices import PriceBook, PriceBookError, price_book_from_document
from ledger.quotas import QuotaTree, QuotaTreeError, quota_tree_from_document

__all__ = [
    "MAX_TENANT_FILE_BYTES",
    "YamlError",
    "load_price_book",
    "load_yaml",
    "parse_price_book",
    "parse_quota_tree",
]


class YamlError(Invalid):
    """Text that is not YAML, or a mapping that repeats a key; the message names the line."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first_line: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # "<<: *base" then overriding a key is not a repeat
            continue
        key = loader.construct_object(key_node)
        try:
            line = first_line.get(key)
        except TypeError:  # unhashable: construct_mapping below refuses it with its mark
            continue
        if line is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {line})",
                key_node.start_mark,
            )
        first_line[key] = key_node.start_mark.line + 1
    return dict(loader.construct_mapping(node))


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _TenantLoader(_UniqueKeyLoader):
    """A loader for files a tenant writes: no anchors and no aliases. An alias is a
    reference, so nine of them nested nine deep (a "billion laughs" file) expand to 10^9
    nodes in memory; a rule file has no use for them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&, *) are not allowed here", event.start_mark
            )
        return super().compose_node(parent, index)


#: the largest file a tenant may send (a rule file); docs/notifications.md
MAX_TENANT_FILE_BYTES = 1_000_000


def load_yaml(text: str, *, tenant: bool = False) -> Any:
    """The document in ``text``; a :class:`YamlError` for bad YAML or a repeated key.
    ``tenant``: a tenant's file, at most :data:`MAX_TENANT_FILE_BYTES` and without anchors
    or aliases."""
    if tenant and len(text.encode("utf-8", "surrogatepass")) > MAX_TENANT_FILE_BYTES:
        raise YamlError(f"the file is larger than {MAX_TENANT_FILE_BYTES:,} bytes")
    try:
        loader = _TenantLoader if tenant else _UniqueKeyLoader
        return yaml.load(text, Loader=loader)  # SafeLoader subclasses
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or " ".join(str(exc).split())
        raise YamlError(f"not valid YAML: {where}{problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {' '.join(str(exc).split())}") from None


def parse_quota_tree(text: str) -> QuotaTree:
    """Parse a quota tree file; every problem is a :class:`~ledger.quotas.QuotaTreeError`."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise QuotaTreeError(str(exc)) from None
    return quota_tree_from_document(raw)


def parse_price_book(text: str, *, source: str = "<price book>") -> PriceBook:
    """Parse and validate a YAML price book; every problem is a :class:`PriceBookError`."""
    try:
        raw = load_yaml(text)
    except YamlError as exc:
        raise PriceBookError(f"{source}: {exc}") from None
    return price_book_from_document(raw, source=source)


def load_price_book(path: str | Path) -> PriceBook:
    """Read and validate the price book at ``path``."""
    p = Path(path)
    return parse_price_book(p.read_text(encoding="utf-8"), source=str(p))
