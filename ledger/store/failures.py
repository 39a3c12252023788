"""The database's failures as kinds of the one error tree (:mod:`ledger.errors`).

The PostgreSQL adapter's exceptions (SQLAlchemy wrapping psycopg) say what went wrong in
the driver's words; an edge (the CLI, the API) must not know them to tell a user "the
database is unreachable" from "that value is out of range". :func:`as_ledger_error` is
the one translation, by SQLSTATE class; it never quotes the SQL or its parameters (a
value a user typed, a password in a URL).
"""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ledger.errors import Conflict, Invalid, LedgerError, TimedOut, Unavailable

__all__ = ["as_ledger_error", "is_poison", "sqlstate"]


def sqlstate(exc: BaseException) -> str:
    """The SQLSTATE a database error carries (SQLAlchemy's or the driver's own), else ""."""
    orig = exc.orig if isinstance(exc, StatementError) else exc
    return str(getattr(orig, "sqlstate", None) or "")


#: query_canceled: a statement ran past ``statement_timeout`` (the API's bound per
#: statement), or an operator cancelled it
_CANCELLED = "57014"

#: a permission refusal is most often a reader login asked to write
_WRITER_HINT = " (a write needs a writer login: docs/store.md, database roles)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _reason(exc: StatementError) -> str:
    text = str(exc.orig).strip()
    return text.splitlines()[0] if text else type(exc.orig).__name__


def as_ledger_error(exc: BaseException) -> LedgerError | None:
    """``exc`` as a kind of the tree when it is the database's word on a request; None
    when it is not a database error."""
    if isinstance(exc, PoolTimeout):  # every pooled connection stayed busy too long
        return TimedOut("no database connection came free in time")
    if sqlstate(exc) == _CANCELLED:
        return TimedOut("the database cancelled a statement that ran too long")
    if not isinstance(exc, StatementError):
        # the adapter's own driver calls (appends, COPY) raise psycopg's errors unwrapped
        if sqlstate(exc) == "42501":
            return Conflict(f"refused by the database: {_first_line(exc)}{_WRITER_HINT}")
        return None
    state = sqlstate(exc)
    if isinstance(exc, OperationalError | InterfaceError) and not state.startswith("54"):
        return Unavailable(f"database unreachable: {_reason(exc)}")
    if state == "42501":
        # insufficient_privilege: the role (docs/store.md) or the append-only trigger refused
        return Conflict(f"refused by the database: {_reason(exc)}{_WRITER_HINT}")
    if isinstance(exc, ProgrammingError):
        return Unavailable(
            f"database error: {_reason(exc)} (is the schema migrated? dlc-ledger db upgrade)"
        )
    if isinstance(exc, IntegrityError) or state.startswith("23"):
        return Conflict(f"refused by the database: {_reason(exc)}")
    if isinstance(exc, DataError) or state.startswith(("22", "54")):
        return Invalid(f"invalid value: {_reason(exc)}")
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return Unavailable(f"database connection lost: {_reason(exc)}")
    return None


#: SQLSTATE classes that blame a value the database was handed: data exception, program
#: limit exceeded (a number out of a column's range, an index row too large)
_VALUE_SQLSTATE_CLASSES = ("22", "54")


def is_poison(exc: BaseException) -> bool:
    """Whether ``exc`` is the fault of the one item being handled (an event, an object, a
    subscription), so a long-running part quarantines that item and goes on.

    The item's faults: a value out of the domain's rules or bounds (:class:`Invalid`,
    which ``OutOfBounds`` and a stored event that no longer decodes are; a fact built
    from the item's values that fails validation, pydantic's ``ValidationError``), arithmetic that
    overflows or is undefined (``ArithmeticError``: ``OverflowError`` of a ``datetime`` or
    a ``timedelta``, a ``decimal`` signal, a division by zero), an instant a ``datetime``
    cannot hold (``ValueError`` "... out of range"), or the database refusing a value
    (SQLSTATE classes 22 and 54). Never an outage (a lost connection, a timeout: retry) and
    never another exception (a bug stops the part loudly, as ingest does:
    ``consumers/store_failures.py``)."""
    if isinstance(exc, StatementError) or hasattr(exc, "sqlstate"):
        state = sqlstate(exc)
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return False
        return state.startswith(_VALUE_SQLSTATE_CLASSES)
    if isinstance(exc, LedgerError):
        return isinstance(exc, Invalid)
    if isinstance(exc, ArithmeticError | ValidationError):
        return True
    return isinstance(exc, ValueError) and "out of range" in str(exc)
