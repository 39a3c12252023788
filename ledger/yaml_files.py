"""YAML as operators write it (quota trees, price books): one loader for every file.

PyYAML keeps the last of two equal keys in a mapping without a word, so a second
``min:`` under a quota would silently replace the first; this loader refuses it and
names the line. It is the one module of ``ledger`` that imports yaml: moving file
parsing to the edge (issue 26, part 4) moves this module with it.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlError", "load_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlError(ValueError):
    """Text that is not YAML, or a mapping that repeats a key; the message names the line."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


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


def load_yaml(text: str) -> Any:
    """The document in ``text``; a :class:`YamlError` for bad YAML or a repeated key."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or " ".join(str(exc).split())
        raise YamlError(f"not valid YAML: {where}{problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {' '.join(str(exc).split())}") from None
