"""The store is sealed: its append lock is the adapter's, callers ask a unit of work for it."""

from __future__ import annotations

from tests.support.paths import ROOT

PRODUCT = ("dlc_ledger", "consumers", "projections", "ledger", "migrations", "kubesim", "bench")


def test_no_module_outside_the_store_names_the_append_lock() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "APPEND_LOCK_KEY" in path.read_text(encoding="utf-8")
        and path.parent != ROOT / "ledger" / "store"
    ]
    assert offenders == []
