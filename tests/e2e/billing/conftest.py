"""Fixtures for the billing end-to-end tests: the CLI on the test database, event builders."""

from __future__ import annotations

import hypothesis  # noqa: F401  (see below)

# hypothesis is imported up front: importing it lazily at the end of a run that only
# holds the trace test trips a CPython 3.11 AST recursion-depth check in pytest's
# assertion rewriter ("AST constructor recursion depth mismatch").
