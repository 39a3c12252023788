"""The HTTP API (FastAPI): the same use cases and read functions as the CLI, over /v1.

Beside :mod:`dlc_ledger.cli` and independent of it (import-linter): both sit on
:mod:`dlc_ledger.wiring` and :mod:`dlc_ledger.services`. Layout: docs/api.md.
"""
