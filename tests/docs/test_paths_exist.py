"""Docs that stay true (issue 45, part 8): every file or folder the README's layout and
"where is" tables, and the docs' module tables, name in backticks exists, and every
``name`` they pair with a module (``path.py`` (``name``: ...)) is defined there."""

from __future__ import annotations

import re

import pytest

from tests.support.paths import ROOT

DOCS = ["README.md", "docs/billing.md", "docs/notifications.md", "docs/threat-model.md"]
#: a backticked path: folders and files of the product (``ledger/bounds.py``, ``tests/x/``)
_PATH = re.compile(r"`((?:[a-z_]+/)+(?:[A-Za-z0-9_.-]+\.(?:py|md|yaml|json|toml))?)`")
#: a module followed by the functions it holds: ``a/b.py`` (``name``
_HOLDS = re.compile(r"`((?:[a-z_]+/)+[a-z_0-9]+\.py)` \(`([A-Za-z_][A-Za-z0-9_]*)`")
#: roots a bare path in the docs is relative to, besides the checkout
_ALSO = ["", "ledger/", "consumers/", "projections/", "processes/", "dlc_ledger/", "tests/"]


def _exists(path: str) -> bool:
    return any((ROOT / base / path).exists() for base in _ALSO)


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    named = sorted(set(_PATH.findall(text)))
    assert named, doc
    missing = [p for p in named if not _exists(p.split("::")[0])]
    assert missing == [], f"{doc} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_a_doc_places_in_a_module_is_there(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    wrong = []
    for path, name in _HOLDS.findall(text):
        source = next((ROOT / b / path for b in _ALSO if (ROOT / b / path).exists()), None)
        if source is None:
            continue  # the path test names it
        if not re.search(
            rf"^\s*(?:def|class|async def)\s+{name}\b|^{name}\s*[:=]", source.read_text(), re.M
        ):
            wrong.append(f"{path}: {name}")
    assert wrong == [], f"{doc} places names where they are not defined: {wrong}"
