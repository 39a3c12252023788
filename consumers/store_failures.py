"""Whose fault a failed write is: the database's (retry later) or the message's (dead letter).

The ingest consumer must never dead-letter a good message because the server was restarting,
nor retry forever a message the store can never take. The SQLSTATE class decides: data
exceptions, integrity violations and program limits blame the data; a lost connection, an
operational or interface error blames the server.
"""

from __future__ import annotations

import psycopg
import sqlalchemy.exc

from ledger.bounds import OutOfBounds
from ledger.canonical import NotCanonical
from ledger.envelopes import EventDecodeError
from ledger.store.failures import sqlstate

__all__ = ["is_transient_store_error", "is_unstorable"]

#: SQLSTATE classes that blame the data, not the server: data exception, integrity
#: violation, program limit exceeded (an index row too large is an "OperationalError").
_DATA_SQLSTATE_CLASSES = ("22", "23", "54")


def is_transient_store_error(exc: BaseException) -> bool:
    """A database outage (retry later), as opposed to a bug or a bad message."""
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if sqlstate(exc).startswith(_DATA_SQLSTATE_CLASSES):
        return False
    return isinstance(
        exc,
        (
            sqlalchemy.exc.OperationalError,
            sqlalchemy.exc.InterfaceError,
            sqlalchemy.exc.DisconnectionError,
            sqlalchemy.exc.TimeoutError,
            psycopg.OperationalError,
            psycopg.InterfaceError,
            ConnectionError,
            TimeoutError,
        ),
    )


def is_unstorable(exc: BaseException) -> bool:
    """The store refused a message's content (not the server's state): dead-letter it.

    Only the message's own faults: it does not decode, breaks a bound, cannot be encoded
    canonically, or the database refused its data (SQLSTATE classes 22, 23, 54). A bug
    (any other ``TypeError``, ``ValueError``, ...) stops the consumer, loudly, with the
    message still unconsumed: dead-lettering it would hide the bug and lose nothing less."""
    if isinstance(exc, sqlalchemy.exc.DBAPIError | psycopg.Error):
        return sqlstate(exc).startswith(_DATA_SQLSTATE_CLASSES)
    return isinstance(exc, EventDecodeError | OutOfBounds | NotCanonical)
