"""The map of every product module that appends to the event store, and the event types
each builds: generated from the code, committed as ``docs/appenders.md``.

A module appends when it calls ``append`` or ``lock_appends`` on a store or a unit of work
(``uow``, ``store``, ``writer``, by name). Its event types are the catalogue's classes it
names (imports or uses): what it builds, and what it reads to decide.
``python -m tests.processes.appenders > docs/appenders.md`` writes the map again.
"""

from __future__ import annotations

import ast
import re

from ledger.envelopes import EventData
from tests.support.paths import ROOT

#: the product's packages (the event store's own adapter appends by definition)
PACKAGES = ("dlc_ledger", "consumers", "processes", "projections", "ledger")
SKIP = ("ledger/store/",)
_RECEIVER = re.compile(r"(uow|store|writer)", re.IGNORECASE)


def _catalogue() -> frozenset[str]:
    import ledger.events as events

    return frozenset(
        name
        for name in dir(events)
        if isinstance(getattr(events, name), type)
        and issubclass(getattr(events, name), EventData)
        and getattr(events, name) is not EventData
    )


def _appends(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "lock_appends")
            and _RECEIVER.search(ast.unparse(node.func.value))
        ):
            return True
    return False


def _named(tree: ast.AST, catalogue: frozenset[str]) -> list[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.ImportFrom) and node.module == "ledger.events":
            names.update(alias.name for alias in node.names)
    return sorted(names & catalogue)


def appender_map() -> dict[str, list[str]]:
    """Module path -> the catalogue's event types it names, for every appending module."""
    catalogue = _catalogue()
    out: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(SKIP):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if _appends(tree):
                out[rel] = _named(tree, catalogue)
    return out


def render(mapping: dict[str, list[str]]) -> str:
    lines = [
        "# Who appends",
        "",
        "Every product module that appends to the event store, with the catalogue's event types",
        "it names (generated: `python -m tests.processes.appenders > docs/appenders.md`;",
        "`tests/processes/test_appenders.py` fails when the code and this map differ). Read",
        "models (`projections/`) never append; decisions are process steps (`processes/`), use",
        "cases (`dlc_ledger/services/`) or stream consumers (`consumers/`).",
        "",
        "| module | event types it names |",
        "|---|---|",
    ]
    for module, types in mapping.items():
        built = ", ".join(f"`{t}`" for t in types) or "(envelopes built elsewhere)"
        lines.append(f"| `{module}` | {built} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(appender_map()), end="")
