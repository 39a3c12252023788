"""The one error tree, mapped once: a refusal is one line and exit 1, something unavailable
exit 69, anything else a bug (its traceback, an error id, exit 70); and ingest dead-letters
only what is the message's own fault."""

from __future__ import annotations

import re

import psycopg
import pytest
import sqlalchemy.exc

from consumers.store_failures import is_unstorable
from dlc_ledger.cli.app import EXIT_BUG, EXIT_REFUSED, EXIT_UNAVAILABLE, main
from dlc_ledger.wiring import context
from ledger.bounds import OutOfBounds
from ledger.canonical import NotCanonical
from ledger.envelopes import InvalidEvent
from ledger.errors import Conflict, Invalid, LedgerError, NotFound, Unavailable
from ledger.prices import NoApplicableRate, PriceBookError
from ledger.quotas import QuotaTreeError
from ledger.store.base import ConcurrencyConflict
from ledger.store.failures import as_ledger_error
from migrations.runner import SchemaNotCurrent


def _failing_reader(exc: BaseException) -> object:
    def open_reader(*, announce: bool = True) -> object:
        raise exc

    return open_reader


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (NotFound("no job 'x'"), EXIT_REFUSED),
        (Invalid("bad --at"), EXIT_REFUSED),
        (Conflict("already voided"), EXIT_REFUSED),
        (Unavailable("database unreachable: connection refused"), EXIT_UNAVAILABLE),
        (FileNotFoundError(2, "No such file or directory", "tree.yaml"), EXIT_REFUSED),
    ],
)
def test_a_refusal_is_one_line_and_its_exit_code(
    exc: BaseException,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(context, "open_reader", _failing_reader(exc))
    assert main(["jobs", "list"]) == code
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert line.startswith("dlc-ledger: error: ") and "Traceback" not in err


def test_a_bug_shows_its_traceback_and_an_error_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a ValueError or a RuntimeError is no longer taken for the user's fault
    for bug in (TypeError("unsupported operand"), ValueError("oops"), RuntimeError("boom")):
        monkeypatch.setattr(context, "open_reader", _failing_reader(bug))
        assert main(["jobs", "list"]) == EXIT_BUG
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err
        assert re.search(r"dlc-ledger: internal error [0-9a-f]{12}: " + type(bug).__name__, err)


def test_the_domain_errors_are_kinds_of_the_tree() -> None:
    assert issubclass(PriceBookError, Invalid) and issubclass(QuotaTreeError, Invalid)
    assert issubclass(OutOfBounds, Invalid) and issubclass(InvalidEvent, Invalid)
    assert issubclass(NoApplicableRate, NotFound) and issubclass(SchemaNotCurrent, Unavailable)
    assert issubclass(ConcurrencyConflict, Conflict)
    assert issubclass(Invalid, ValueError) and issubclass(NotFound, LookupError)


def _db_error(kind: type[sqlalchemy.exc.DBAPIError], sqlstate: str) -> sqlalchemy.exc.DBAPIError:
    orig = psycopg.Error("driver says no")
    orig.sqlstate = sqlstate  # type: ignore[misc]
    return kind("SELECT secret FROM t WHERE v = %(v)s", {"v": "hunter2"}, orig)


def test_the_databases_word_becomes_a_kind_without_the_sql() -> None:
    cases = [
        (_db_error(sqlalchemy.exc.OperationalError, "08006"), Unavailable, "database unreachable"),
        (_db_error(sqlalchemy.exc.DataError, "22003"), Invalid, "invalid value"),
        (_db_error(sqlalchemy.exc.IntegrityError, "23505"), Conflict, "refused by the database"),
        (_db_error(sqlalchemy.exc.ProgrammingError, "42501"), Conflict, "refused by the database"),
        (_db_error(sqlalchemy.exc.ProgrammingError, "42P01"), Unavailable, "db upgrade"),
    ]
    for exc, kind, words in cases:
        found = as_ledger_error(exc)
        assert isinstance(found, kind) and words in str(found), (exc, found)
        assert "hunter2" not in str(found) and "SELECT" not in str(found)
    assert as_ledger_error(TypeError("not the database")) is None
    # the adapter's own driver calls (an append) raise psycopg's error unwrapped: a reader
    # login asked to write is refused, with where the writer logins are described
    raw = as_ledger_error(
        psycopg.errors.InsufficientPrivilege("permission denied for table events")
    )
    assert isinstance(raw, Conflict) and "writer login" in str(raw), raw
    assert as_ledger_error(psycopg.errors.UniqueViolation("dup")) is None
    assert isinstance(as_ledger_error(_db_error(sqlalchemy.exc.DataError, "22003")), LedgerError)


def test_ingest_dead_letters_the_messages_faults_never_a_bug() -> None:
    assert is_unstorable(InvalidEvent("not JSON"))
    assert is_unstorable(OutOfBounds("mgpu above the bound"))
    assert is_unstorable(NotCanonical("set is not canonically serialisable"))
    assert is_unstorable(_db_error(sqlalchemy.exc.DataError, "22021"))  # a NUL in text
    assert is_unstorable(_db_error(sqlalchemy.exc.IntegrityError, "23505"))
    assert is_unstorable(_db_error(sqlalchemy.exc.OperationalError, "54000"))  # row too big
    for bug in (TypeError("x"), ValueError("y"), OverflowError("z"), KeyError("k")):
        assert not is_unstorable(bug), bug
    assert not is_unstorable(_db_error(sqlalchemy.exc.OperationalError, "08006"))
