"""``dlc-ledger tokens``: a secret shown once and stored hashed, roles checked, revocation."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import text

from dlc_ledger.services.errors import InvalidRequest
from dlc_ledger.services.tokens import authenticate, parse_roles
from ledger.store.postgres import PostgresEventStore
from tests.clis import CliCall


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
    assert json.loads(cli("tokens", "list", "--format", "json")) == []


def test_roles_are_deduplicated_and_needed() -> None:
    assert parse_roles(["auditor", "auditor", "workspace:x"]) == ("auditor", "workspace:x")
    with pytest.raises(InvalidRequest):
        parse_roles([])
