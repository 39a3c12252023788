"""The one error tree: every refusal the product makes, by kind, so each edge maps it once.

A request is refused because what it names does not exist (:class:`NotFound`), its own
values are unusable (:class:`Invalid`), it contradicts the current state
(:class:`Conflict`), or something it needs is not there right now (:class:`Unavailable`).
Each carries a one-line message a person can act on. The HTTP API maps the kinds to
problem details (404, 400/422, 409, 503), the CLI to one line on stderr and an exit code
(docs/conventions.md, "Errors"); anything that is not a :class:`LedgerError` is a bug
and is shown as one (a traceback with an error id), never as the user's fault.

Domain errors elsewhere in ``ledger`` are kinds of these (an unknown price is
:class:`NotFound`, a malformed quota file :class:`Invalid`). :class:`Invalid` is also a
``ValueError`` and :class:`NotFound` a ``LookupError``, so code that validates with
Python's own exceptions keeps working. :class:`TimedOut` is the one :class:`Unavailable`
an edge tells apart: the request itself ran too long (the API adds ``Retry-After``).
"""

from __future__ import annotations

__all__ = ["Conflict", "Invalid", "LedgerError", "NotFound", "TimedOut", "Unavailable"]


class LedgerError(Exception):
    """A request the product refuses; its message is one line."""


class NotFound(LedgerError, LookupError):
    """The request names something that does not exist (or that its caller may not see)."""


class Invalid(LedgerError, ValueError):
    """The request's own values are unusable (a malformed file, an amount finer than the
    currency, an instant out of range)."""


class Conflict(LedgerError):
    """The request contradicts the current state (already voided, a reused key, too much)."""


class Unavailable(LedgerError):
    """Something the request needs is not reachable now (the database, the broker, a
    projection that has not caught up within the wait asked for); trying again may work."""


class TimedOut(Unavailable):
    """The request ran past a time limit and was given up: a statement the database
    cancelled (the API's statement timeout), or no pooled connection came free in time.
    Trying again later, or asking for less, may work."""
