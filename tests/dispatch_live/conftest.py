"""Fixtures of the live dispatcher tests: the watcher tests' kubesim and recorder."""

from __future__ import annotations

from tests.watchers.conftest import recorder, sim

__all__ = ["recorder", "sim"]
