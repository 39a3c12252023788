"""The errors a use case refuses a request with, by kind, so each caller maps them its way.

Every one is a ``ValueError`` with a one-line message a person can act on: the CLI prints
it as ``dlc-ledger: error: …``; an API can answer 404 for :class:`NotFound`, 409 for
:class:`Conflict` and 400 for any other :class:`UseCaseError` without parsing messages.
"""

from __future__ import annotations

__all__ = ["Conflict", "InvalidRequest", "NotFound", "UseCaseError"]


class UseCaseError(ValueError):
    """A request a use case refuses (its message is one line)."""


class NotFound(UseCaseError):
    """The request names something that does not exist."""


class Conflict(UseCaseError):
    """The request contradicts the current state (already voided, a reused key, too much)."""


class InvalidRequest(UseCaseError):
    """The request's own values are unusable (an amount finer than the currency, no reason)."""
