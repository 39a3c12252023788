"""``dlc-ledger tokens``: a secret shown once and stored hashed, roles checked, revocation,
expiry."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import (
    DEFAULT_LIFETIME,
    TokenExpired,
    authenticate,
    create_token,
    parse_lifetime,
    parse_roles,
)
from dlc_ledger.services.errors import InvalidRequest
from ledger.canonical import parse_timestamp
from ledger.store.postgres import PostgresEventStore
from tests.support.clis import CliCall


def test_create_shows_the_secret_once_and_stores_only_its_hash(
    cli: CliCall, store: PostgresEventStore
) -> None:
    secret = cli(
        "tokens", "create", "--role", "workspace:a", "--role", "finance",
        "--allow-unknown-workspace",
    ).strip()  # fmt: skip
    assert secret.startswith("dlct_") and len(secret) > 40
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT secret_sha256 FROM api_tokens")).scalar_one()
    assert stored == hashlib.sha256(secret.encode()).hexdigest()
    listed = cli("tokens", "list", "--format", "json")
    assert secret not in listed and stored not in listed
    (row,) = json.loads(listed)
    assert row["roles"] == "workspace:a finance" and row["revoked_at"] == ""
    principal = authenticate(store, secret)
    assert principal is not None and principal.scope is None
    assert principal.workspaces == {"a"}


def test_a_revoked_token_authenticates_no_more(cli: CliCall, store: PostgresEventStore) -> None:
    secret = cli(
        "tokens", "create", "--role", "workspace:a", "--name", "lead-a",
        "--allow-unknown-workspace",
    ).strip()  # fmt: skip
    principal = authenticate(store, secret)
    assert principal is not None and principal.name == "lead-a"
    assert principal.scope == {"a"} and not principal.can_write
    assert cli("tokens", "revoke", principal.token_id).strip() == "revoked"
    assert cli("tokens", "revoke", principal.token_id).strip() == "already revoked"
    assert authenticate(store, secret) is None
    assert authenticate(store, secret + "x") is None
    (row,) = json.loads(cli("tokens", "list", "--format", "json"))
    assert row["revoked_at"]


def test_unknown_roles_and_tokens_are_refused(cli: CliCall) -> None:
    assert "unknown role 'root'" in cli("tokens", "create", "--role", "root", ok=False)
    assert "names no workspace" in cli("tokens", "create", "--role", "workspace:", ok=False)
    assert "no token with id 'tok_nope'" in cli("tokens", "revoke", "tok_nope", ok=False)
    refused = cli("tokens", "create", "--role", "workspace:ws-nonexistent", ok=False)
    assert "unknown workspace(s) ws-nonexistent" in refused
    # names are checked for control characters where they enter (issue 44)
    bad_name = cli("tokens", "create", "--role", "auditor", "--name", "ci\x1b[2J", ok=False)
    assert "name: control character '\\x1b'" in bad_name
    bad_ws = cli(
        "tokens", "create", "--role", "workspace:ws\nx", "--allow-unknown-workspace", ok=False
    )
    assert "role workspace:<id>: control character '\\n'" in bad_ws
    assert json.loads(cli("tokens", "list", "--format", "json")) == []


def test_roles_are_deduplicated_and_needed() -> None:
    assert parse_roles(["auditor", "auditor", "workspace:x"]) == ("auditor", "workspace:x")
    with pytest.raises(InvalidRequest):
        parse_roles([])


def _listed(cli: CliCall) -> dict[str, dict[str, str]]:
    return {row["name"]: row for row in json.loads(cli("tokens", "list", "--format", "json"))}


def test_a_token_expires_after_90_days_unless_told_otherwise(
    cli: CliCall, store: PostgresEventStore
) -> None:
    before = datetime.now(UTC)
    cli("tokens", "create", "--role", "admin", "--name", "default")
    cli("tokens", "create", "--role", "admin", "--name", "short", "--expires-in", "12h")
    cli("tokens", "create", "--role", "auditor", "--name", "weeks", "--expires-in", "2w")
    cli("tokens", "create", "--role", "metrics", "--name", "forever", "--expires-in", "never")
    after = datetime.now(UTC)
    rows = _listed(cli)

    def expiry(name: str) -> datetime:
        return parse_timestamp(rows[name]["expires_at"])

    assert before + DEFAULT_LIFETIME <= expiry("default") <= after + DEFAULT_LIFETIME
    assert timedelta(days=90) == DEFAULT_LIFETIME  # as documented
    assert before + timedelta(hours=12) <= expiry("short") <= after + timedelta(hours=12)
    assert before + timedelta(weeks=2) <= expiry("weeks") <= after + timedelta(weeks=2)
    assert rows["forever"]["expires_at"] == "never"
    with store.engine.connect() as conn:
        never = conn.execute(
            text("SELECT expires_at FROM api_tokens WHERE name = 'forever'")
        ).scalar_one()
    assert never is None


@pytest.mark.parametrize("bad", ["0d", "-1d", "90", "1y", "3651d", "12 h", "forever", ""])
def test_a_bad_expiry_is_refused_before_anything_is_stored(cli: CliCall, bad: str) -> None:
    refused = cli("tokens", "create", "--role", "admin", "--expires-in", bad, ok=False)
    assert "expiry" in refused, refused
    assert _listed(cli) == {}


def test_lifetimes_parse_in_minutes_hours_days_and_weeks() -> None:
    assert parse_lifetime("30m") == timedelta(minutes=30)
    assert parse_lifetime("12H") == timedelta(hours=12)
    assert parse_lifetime("3650d") == timedelta(days=3650)
    assert parse_lifetime(" never ") is None
    with pytest.raises(InvalidRequest, match="beyond 3650 days"):
        parse_lifetime("522w")


def test_an_expired_token_authenticates_no_more_by_the_clock_given(
    store: PostgresEventStore,
) -> None:
    made = datetime(2021, 1, 1, tzinfo=UTC)
    created = create_token(
        store, ["auditor"], name="brief", created_by="test", now=made, expires_in=timedelta(hours=1)
    )
    assert created.token.expires_at == made + timedelta(hours=1)
    principal = authenticate(store, created.secret, now=made + timedelta(minutes=59))
    assert principal is not None and principal.name == "brief"
    for later in (made + timedelta(hours=1), made + timedelta(days=400)):
        with pytest.raises(TokenExpired, match="expired at 2021-01-01T01:00:00Z"):
            authenticate(store, created.secret, now=later)
    # the wall clock, by default: long past
    with pytest.raises(TokenExpired):
        authenticate(store, created.secret)
    # a wrong secret is unknown, not expired: nothing is said about the token it resembles
    assert authenticate(store, created.secret + "x", now=made + timedelta(days=400)) is None
    forever = create_token(store, ["auditor"], name="f", created_by="t", now=made, expires_in=None)
    assert authenticate(store, forever.secret, now=made + timedelta(days=36500)) is not None


def test_the_api_answers_an_expired_token_401_invalid_token(store: PostgresEventStore) -> None:
    past = datetime.now(UTC) - timedelta(days=2)
    expired = create_token(
        store, ["admin"], name="old", created_by="test", now=past, expires_in=timedelta(days=1)
    )
    live = create_token(store, ["admin"], name="new", created_by="test")
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        response = client.get("/v1/whoami", headers={"Authorization": f"Bearer {expired.secret}"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert response.headers["content-type"] == "application/problem+json"
        detail = response.json()["detail"]
        assert detail.startswith(f"token {expired.token.token_id} expired at "), detail
        ok = client.get("/v1/whoami", headers={"Authorization": f"Bearer {live.secret}"})
        assert ok.status_code == 200
