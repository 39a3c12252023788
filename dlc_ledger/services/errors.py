"""The errors a use case refuses a request with: the domain's one tree (:mod:`ledger.errors`),
under the names the use cases have always used."""

from __future__ import annotations

from ledger.errors import Conflict, Invalid, LedgerError, NotFound, Unavailable

__all__ = ["Conflict", "InvalidRequest", "NotFound", "Unavailable", "UseCaseError"]

UseCaseError = LedgerError
InvalidRequest = Invalid
