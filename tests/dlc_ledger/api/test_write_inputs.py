"""Every write route checks what it is sent where it enters, as ingest checks a fact: a
workspace the ledger does not know, a control character in a name, a number sent as a
string, and a dry run that must answer what the write would (issue 44)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from dlc_ledger.services.billing import issue_credit_note, void_invoice
from ledger.bounds import OutOfBounds
from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer

BUY = {
    "group": "gpu-g2",
    "spec": "ml.g2.8xlarge",
    "nodes": 2,
    "term": "month",
    "workspace": "ws-a",
    "at": "2027-01-10T00:00:00Z",
    "key": "order-1",
}


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    return detail


def _buy(client: TestClient, token: str, **changes: Any) -> httpx.Response:
    response: httpx.Response = client.post(
        "/v1/subscriptions", json={**BUY, **changes}, headers=bearer(token)
    )
    return response


def test_a_purchase_for_an_unknown_workspace_is_refused(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    head = store.head_position()
    for dry_run in (True, False):
        refused = _problem(
            _buy(client, tokens["finance"], workspace="ws-nope", dry_run=dry_run), 400
        )
        assert refused.startswith("workspace: unknown workspace(s) ws-nope")
        assert "ws-a, ws-b, ws-c" in refused  # the known ones, as tokens create lists them
        assert "allow_unknown_workspace" in refused or "--allow-unknown-workspace" in refused
    assert store.head_position() == head  # nothing billed
    # said on purpose: accepted
    bought = _buy(client, tokens["finance"], workspace="ws-new", allow_unknown_workspace=True)
    assert bought.status_code == 201, bought.text
    assert bought.json()["subscription"]["workspace"] == "ws-new"
    # a known one needs no flag
    assert _buy(client, tokens["finance"], key="order-2").status_code == 201


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("group", "g\nx"),
        ("group", "gpu\x1b[31m"),
        ("workspace", "ws-a\n"),
        ("spec", "ml.g2.8xlarge\r"),
        ("key", "k\u202egnp.exe"),  # a bidi override
        ("group", " gpu-g2"),
        ("group", "g" * 64),
        ("key", "k" * 254),
    ],
)
def test_a_name_with_a_control_character_or_too_long_is_a_422(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore, field: str, value: str
) -> None:
    head = store.head_position()
    detail = _problem(_buy(client, tokens["admin"], **{field: value}), 422)
    assert detail.startswith(f"body.{field}:"), detail
    assert store.head_position() == head


def test_a_cancellation_reason_with_a_control_character_is_a_422(
    client: TestClient, tokens: dict[str, str]
) -> None:
    admin = bearer(tokens["admin"])
    sub_id = _buy(client, tokens["admin"]).json()["subscription"]["subscription_id"]
    url = f"/v1/subscriptions/{sub_id}/cancel"
    detail = _problem(client.post(url, json={"reason": "ok\x1b]0;pwned\x07"}, headers=admin), 422)
    assert detail.startswith("body.reason:") and "control character" in detail
    # line breaks and tabs are text
    fine = client.post(
        url,
        json={"reason": "two\nlines\tand a tab", "dry_run": True, "at": BUY["at"]},
        headers=admin,
    )
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize(
    ("field", "value"),
    [("nodes", "1"), ("nodes", 1.0), ("nodes", True), ("dry_run", "true"), ("auto_renew", 1)],
)
def test_numbers_and_flags_must_be_json_numbers_and_booleans(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore, field: str, value: Any
) -> None:
    head = store.head_position()
    assert _problem(_buy(client, tokens["admin"], **{field: value}), 422).startswith(
        f"body.{field}:"
    )
    assert store.head_position() == head


def test_a_dry_run_answers_what_the_purchase_would(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    head = store.head_position()
    late = {"at": "2199-12-31T00:00:00Z", "key": "late"}
    dry = _buy(client, tokens["admin"], dry_run=True, **late)
    real = _buy(client, tokens["admin"], **late)
    assert (dry.status_code, real.status_code) == (400, 400), (dry.text, real.text)
    assert _problem(dry, 400) == _problem(real, 400)
    assert store.head_position() == head
    # and a renewal's and a cancellation's dry runs likewise
    sub_id = _buy(client, tokens["admin"]).json()["subscription"]["subscription_id"]
    admin = bearer(tokens["admin"])
    for action in ("renew", "cancel"):
        url = f"/v1/subscriptions/{sub_id}/{action}"
        body = {"at": "2199-12-31T00:00:00Z"}
        dry = client.post(url, json={**body, "dry_run": True}, headers=admin)
        real = client.post(url, json=body, headers=admin)
        assert dry.status_code == real.status_code, (action, dry.text, real.text)
        assert dry.json()["detail"] == real.json()["detail"]


def test_invoice_reasons_and_keys_are_checked_where_they_enter(store: PostgresEventStore) -> None:
    """The CLI's ``invoices void|credit`` (their use cases): checked before any read."""
    with pytest.raises(OutOfBounds, match=r"^reason: control character '\\x1b'"):
        void_invoice(store, "inv-nope", "typo\x1b[2K", principal="test")
    with pytest.raises(OutOfBounds, match=r"^idempotency key: control character '\\r'"):
        issue_credit_note(
            store, "inv-nope", "1.00", "goodwill", principal="test", idempotency_key="k\rx"
        )
