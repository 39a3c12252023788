"""The API's bounds on one request (docs/api.md, "Limits"): a statement past the statement
timeout is a 503 with ``Retry-After`` and the connection serves the next request; a token
past its rate is a 429 with ``Retry-After``; a window wider than its cap is a 400 before
any read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Connection, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from dlc_ledger.api.app import create_app
from dlc_ledger.api.problems import RETRY_AFTER_TIMED_OUT
from dlc_ledger.api.rate_limits import RateLimiter, rate_limiter
from dlc_ledger.api.windows import SPAN_CAPS, WEIGHED_HOURLY
from dlc_ledger.services.access import create_token
from dlc_ledger.services.quotas import apply_quota_file
from dlc_ledger.wiring.settings import Settings
from ledger.errors import Invalid, TimedOut, Unavailable
from ledger.store.engines import make_engine
from ledger.store.failures import as_ledger_error
from ledger.store.postgres import PostgresEventStore
from tests.support.api import QUOTA_TREE, bearer, seed_dispatch, seed_jobs
from tests.support.builders import EPOCH

PROBLEM = "application/problem+json"


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the statement timeout ------------------------------------------------------------------


def test_the_timeout_is_set_on_every_session_of_the_store(database_url: str) -> None:
    engine = make_engine(database_url)
    with engine.connect() as conn:  # pooled before the store bounds it: no timeout yet
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == "0"
    bounded = PostgresEventStore(engine, statement_timeout=0.25)
    try:
        with bounded.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar_one() == "250ms"
        with bounded.snapshot() as uow:
            shown = uow.connection.exec_driver_sql("SHOW statement_timeout").scalar_one()
            assert shown == "250ms"
    finally:
        bounded.close()
    with pytest.raises(Invalid, match="statement timeout"):
        PostgresEventStore(database_url, statement_timeout=0)


@pytest.fixture
def locked(store: PostgresEventStore) -> Iterator[Callable[[str], Connection]]:
    """A function taking an exclusive lock on a table (its connection returned, to roll
    back early): any statement reading it waits, as a costly one would run, until the
    timeout cancels it. Released after 10 s whatever happens: a test whose timeout does not
    work fails rather than hangs."""
    held: list[tuple[Connection, threading.Timer]] = []

    def lock(table: str) -> Connection:
        conn = store.engine.connect()
        conn.exec_driver_sql(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        guard = threading.Timer(10, conn.rollback)
        guard.start()
        held.append((conn, guard))
        return conn

    yield lock
    for conn, guard in held:
        guard.cancel()
        conn.rollback()
        conn.close()


def test_a_cancelled_statement_is_timed_out_on_both_paths_of_the_store(
    database_url: str, locked: Callable[[str], Connection]
) -> None:
    """SQLAlchemy's statements and the adapter's own driver cursor (``_fetch``) alike."""
    bounded = PostgresEventStore(database_url, statement_timeout=0.1)
    try:
        locked("events")
        with pytest.raises(OperationalError) as wrapped:
            bounded.head_position()
        with pytest.raises(psycopg.errors.QueryCanceled) as raw, bounded.snapshot() as uow:
            uow.read_window(0, 10)
        for caught in (wrapped.value, raw.value):
            known = as_ledger_error(caught)
            assert isinstance(known, TimedOut) and isinstance(known, Unavailable), caught
            assert "cancelled a statement that ran too long" in str(known)
    finally:
        bounded.close()


@pytest.fixture
def seeded(store: PostgresEventStore) -> dict[str, str]:
    """The ``dispatched`` data and two tokens (admin, and a workspace lead)."""
    apply_quota_file(store, QUOTA_TREE, principal="api/test", at=EPOCH)
    seed_jobs(store)
    seed_dispatch(store)
    return {
        name: create_token(store, roles, name=name, created_by="test").secret
        for name, roles in {"admin": ["admin"], "lead-a": ["workspace:ws-a"]}.items()
    }


def test_a_request_past_the_timeout_is_a_503_and_its_connection_serves_the_next(
    database_url: str, seeded: dict[str, str], locked: Callable[[str], Connection]
) -> None:
    # one pooled connection: the request after the cancelled one must run on it
    bounded = PostgresEventStore(
        make_engine(database_url, pool_size=1, max_overflow=0), statement_timeout=0.2
    )
    backends: list[int] = []
    event.listen(
        bounded.engine, "checkout", lambda dbapi, *_: backends.append(dbapi.info.backend_pid)
    )
    headers = bearer(seeded["admin"])
    try:
        with TestClient(create_app(bounded), raise_server_exceptions=False) as client:
            assert client.get("/v1/cost", headers=headers).status_code == 200
            # the cost report waits for the lock as a slow statement would run
            held = locked("billing_occupancies")
            started = datetime.now(UTC)
            slow = client.get("/v1/cost", params={"group_by": "day"}, headers=headers)
            waited = datetime.now(UTC) - started
            held.rollback()
            assert slow.status_code == 503, slow.text
            assert slow.headers["content-type"] == PROBLEM
            assert slow.headers["retry-after"] == str(RETRY_AFTER_TIMED_OUT)
            assert "ran too long" in slow.json()["detail"]
            assert waited < timedelta(seconds=5)  # cancelled, not waited out
            # the same connection, its session intact, serves the same read at once
            after = client.get("/v1/cost", params={"group_by": "day"}, headers=headers)
            assert after.status_code == 200, after.text
            assert after.json()["items"]
    finally:
        bounded.close()
    assert len(backends) >= 3 and len(set(backends)) == 1, backends


def test_a_pool_without_a_free_connection_in_time_is_timed_out_too() -> None:
    known = as_ledger_error(PoolTimeout("QueuePool limit of size 5 overflow 10 reached"))
    assert isinstance(known, TimedOut)
    assert str(known) == "no database connection came free in time"


def test_the_503_of_a_timed_out_use_case_carries_retry_after(
    store: PostgresEventStore, seeded: dict[str, str]
) -> None:
    """A :class:`TimedOut` a use case raises itself is answered as the database's is."""
    app = create_app(store)

    @app.get("/test/timed-out")
    def timed_out() -> None:
        raise TimedOut("no database connection came free in time")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/test/timed-out")
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(RETRY_AFTER_TIMED_OUT)
    assert response.json()["detail"].startswith("no database connection came free in time")


# -- the rate limit -------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_lets_a_burst_through_then_its_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, 3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [None, None, None]
    assert limiter.take("a") == 1  # half a second to the next token: 1 whole second
    assert limiter.take("b") is None  # another principal has its own bucket
    clock.now += 0.5
    assert limiter.take("a") is None
    assert limiter.take("a") == 1
    clock.now += 10  # refilled, never beyond the burst
    assert [limiter.take("a") for _ in range(4)] == [None, None, None, 1]


def test_retry_after_is_whole_seconds_until_a_token() -> None:
    clock = FakeClock()
    slow = RateLimiter(0.1, 1, clock=clock)  # one request every 10 s
    assert slow.take("a") is None
    assert slow.take("a") == 10
    clock.now += 2.5
    assert slow.take("a") == 8  # 7.5 s left, rounded up
    clock.now += 7.5
    assert slow.take("a") is None


def test_buckets_of_principals_gone_quiet_are_forgotten() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10, 5, clock=clock)
    for n in range(100):
        limiter.take(f"oidc:user-{n}")
    assert len(limiter) == 100
    clock.now += 0.5  # full again after 0.5 s (5 tokens at 10/s)
    limiter.take("oidc:user-0")
    assert len(limiter) == 1


def test_a_rate_of_zero_turns_the_limit_off_and_a_bad_one_is_refused() -> None:
    assert rate_limiter(0, 100) is None
    made = rate_limiter(50, 100)
    assert made is not None and (made.rate, made.burst) == (50, 100)
    for rate, burst in ((-1, 10), (float("inf"), 10), (1, 0)):
        with pytest.raises(Invalid):
            RateLimiter(rate, burst)


def test_the_limits_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings()
    assert (defaults.api_statement_timeout, defaults.api_rate, defaults.api_burst) == (
        10,
        50,
        100,
    )
    monkeypatch.setenv("DLC_API_STATEMENT_TIMEOUT", "2.5")
    monkeypatch.setenv("DLC_API_RATE", "0")
    monkeypatch.setenv("DLC_API_BURST", "7")
    given = Settings()
    assert (given.api_statement_timeout, given.api_rate, given.api_burst) == (2.5, 0, 7)


def test_a_token_past_its_rate_is_a_429_with_retry_after(
    store: PostgresEventStore, seeded: dict[str, str]
) -> None:
    clock = FakeClock()
    limiter = RateLimiter(1, 2, clock=clock)
    app: FastAPI = create_app(store, rate_limits=limiter)
    admin, lead = bearer(seeded["admin"]), bearer(seeded["lead-a"])
    with TestClient(app, raise_server_exceptions=False) as client:
        assert [client.get("/v1/whoami", headers=admin).status_code for _ in range(2)] == [
            200,
            200,
        ]
        refused = client.get("/v1/jobs", headers=admin)
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == PROBLEM
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["detail"] == (
            "more than 2 requests at once or 1 a second with this token; retry in 1 s"
        )
        assert client.get("/v1/whoami", headers=lead).status_code == 200  # its own bucket
        # no token, or an unknown one: a 401, whatever the count, and no bucket
        for _ in range(5):
            assert client.get("/v1/whoami").status_code == 401
            unknown = client.get("/v1/whoami", headers=bearer("dlct_unknown"))
            assert unknown.status_code == 401
        assert len(limiter) == 2
        clock.now += 1
        assert client.get("/v1/whoami", headers=admin).status_code == 200
        assert client.get("/v1/whoami", headers=admin).status_code == 429


# -- the window caps ------------------------------------------------------------------------


def _get(client: TestClient, token: str, path: str, **params: str) -> Any:
    return client.get(path, params=params, headers=bearer(token))


def _refused(response: Any, cap: timedelta) -> str:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM
    detail: str = response.json()["detail"]
    assert detail.startswith("from/to span") and f"at most {cap.days:,} days" in detail, detail
    return detail


def _points(series: Any) -> int:
    return len({row["at"] for row in series.json()["items"]})


def _window(days: float, start: datetime = EPOCH) -> dict[str, str]:
    return {"from": _iso(start), "to": _iso(start + timedelta(days=days))}


def test_the_caps_are_the_documented_ones() -> None:
    """The tests below read the caps from the module; here they are stated (docs/api.md
    "Limits"), so a changed cap fails a test that names the number."""
    assert dict(SPAN_CAPS) == {
        "hour": timedelta(days=92),
        "day": timedelta(days=1_096),
        WEIGHED_HOURLY: timedelta(days=1_096),
        None: timedelta(days=36_525),
    }


def test_a_series_is_capped_by_its_step(dispatched: TestClient, tokens: dict[str, str]) -> None:
    admin, path = tokens["admin"], "/v1/quotas/q-ws-a/series"
    # the caps stated here, not read from the module under test: a quarter hourly, three
    # years daily (docs/api.md "Limits")
    hour, day = timedelta(days=92), timedelta(days=1_096)
    assert (SPAN_CAPS["hour"], SPAN_CAPS["day"]) == (hour, day)
    month = _get(dispatched, admin, path, step="hour", limit="10000", **_window(30))
    assert month.status_code == 200 and _points(month) == 30 * 24 + 1
    assert _get(dispatched, admin, path, step="hour", **_window(hour.days)).status_code == 200
    too_long = _get(dispatched, admin, path, step="hour", **_window(hour.days + 1))
    assert "a series at step=hour" in _refused(too_long, hour)
    assert "use step=day" in too_long.json()["detail"]
    year = _get(dispatched, admin, path, step="day", limit="10000", **_window(366))
    assert year.status_code == 200 and _points(year) == 367
    _refused(_get(dispatched, admin, path, step="day", **_window(day.days + 1)), day)
    # `from` left out: the first change, so the window as resolved is checked
    beyond = _iso(EPOCH + timedelta(days=hour.days + 2))
    _refused(_get(dispatched, admin, path, step="hour", to=beyond), hour)
    assert _get(dispatched, admin, path, step="day", to=beyond).status_code == 200


def test_a_report_grouped_by_day_is_capped_to_three_years(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    admin, day, whole = tokens["admin"], SPAN_CAPS["day"], SPAN_CAPS[None]
    for path in ("/v1/cost", "/v1/usage"):
        year = _get(dispatched, admin, path, group_by="workspace,day", **_window(365))
        assert year.status_code == 200 and year.json()["items"], year.text
        wide = _get(dispatched, admin, path, group_by="day", **_window(day.days + 1))
        assert "group_by=day" in _refused(wide, day)
        # by month, or with no time key: the window of a report, a century
        decade = _get(dispatched, admin, path, group_by="workspace,month", **_window(3653))
        assert decade.status_code == 200, decade.text
        _refused(_get(dispatched, admin, path, group_by="month", **_window(whole.days + 1)), whole)


#: every other route with a window: a century at most (the instants' own range is 230 years)
WINDOWED = [
    "/v1/usage",
    "/v1/cost",
    "/v1/cost/top",
    "/v1/quotas/tree",
    "/v1/waits",
    "/v1/preemptions",
    "/v1/goodput",
]


@pytest.mark.parametrize("path", WINDOWED)
def test_every_window_is_capped(dispatched: TestClient, tokens: dict[str, str], path: str) -> None:
    admin, whole = tokens["admin"], SPAN_CAPS[None]
    detail = _refused(
        _get(
            dispatched,
            admin,
            path,
            **{"from": "1970-01-01T00:00:00Z", "to": "2199-12-31T00:00:00Z"},
        ),
        whole,
    )
    assert "leave them out for the whole data" in detail
    assert _get(dispatched, admin, path, **_window(whole.days)).status_code == 200


def test_the_subscription_utilisation_window_is_capped_by_its_hours(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    """Weighed hour by hour in Python (no statement timeout bounds it): three years at
    most, so 1970-2069 (which took 47-75 s) is a 400 at once (issue 44)."""
    admin, cap = tokens["admin"], SPAN_CAPS[WEIGHED_HOURLY]
    path = "/v1/subscription-utilisation"
    wide = {"from": "1970-01-01T00:00:00Z", "to": "2069-12-31T00:00:00Z"}
    detail = _refused(_get(dispatched, admin, path, **wide), cap)
    assert "weighs every hour" in detail
    _refused(_get(dispatched, admin, path, **_window(cap.days + 1)), cap)
    assert _get(dispatched, admin, path, **_window(cap.days)).status_code == 200


def test_a_wide_window_is_refused_before_any_read(
    database_url: str, seeded: dict[str, str], locked: Callable[[str], Connection]
) -> None:
    """With the tables it would read locked, the refusal still comes at once: nothing was
    read (the timeout is a guard: a read would have been a 503)."""
    bounded = PostgresEventStore(database_url, statement_timeout=2)
    headers = bearer(seeded["admin"])
    try:
        locked("billing_occupancies")
        locked("quota_changes")
        with TestClient(create_app(bounded), raise_server_exceptions=False) as client:
            for path, params in (
                ("/v1/cost", {"group_by": "day", **_window(SPAN_CAPS["day"].days + 1)}),
                ("/v1/quotas/root/series", {"step": "hour", **_window(365)}),
                ("/v1/quotas/tree", {"from": "1970-01-01T00:00:00Z", "to": "2199-01-01T00:00:00Z"}),
            ):
                started = datetime.now(UTC)
                response = client.get(path, params=params, headers=headers)
                assert response.status_code == 400, (path, response.text)
                assert datetime.now(UTC) - started < timedelta(seconds=1.5), path
    finally:
        bounded.close()
