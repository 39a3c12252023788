"""The ``slow`` mark, given where a test starts processes or replays, so no one has to remember it.

``./dev test -m "not slow"`` is the quick loop (pure rules, projections, the API in process, the
CLI in process); CI runs everything. A test is slow when

- its module starts processes (it imports ``subprocess`` or ``multiprocessing``);
- it uses a fixture that starts one: the Tansu broker, kubesim, the live dispatcher, the
  dashboard's server and browser, the exports' seeded world;
- it lives in a folder of whole-product runs: ``tests/e2e`` (replays, the demo, closed
  loops), ``tests/chaos``, ``tests/packaging``.

A module may also mark itself (``pytestmark = pytest.mark.slow``); marks only add up.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

__all__ = ["PROCESS_FIXTURES", "SLOW_FOLDERS", "is_slow"]

PROCESS_FIXTURES = frozenset(
    {"broker", "bootstrap", "topic", "sim", "live", "served", "browser", "watched", "seeded"}
)
SLOW_FOLDERS = ("e2e", "chaos", "packaging")
_STARTS_PROCESSES = re.compile(r"^\s*(import|from)\s+(subprocess|multiprocessing)\b", re.M)
_TESTS = Path(__file__).resolve().parents[1]


@cache
def _module_starts_processes(path: Path) -> bool:
    return bool(_STARTS_PROCESSES.search(path.read_text(encoding="utf-8")))


def is_slow(path: Path, fixturenames: list[str]) -> bool:
    """Whether a test at ``path`` using ``fixturenames`` starts processes or replays."""
    try:
        folder = path.resolve().relative_to(_TESTS).parts[0]
    except ValueError:
        folder = ""
    return (
        folder in SLOW_FOLDERS
        or not PROCESS_FIXTURES.isdisjoint(fixturenames)
        or _module_starts_processes(path)
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None and is_slow(
            item.path, list(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.slow)
