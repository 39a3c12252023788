"""``/v1/invoices``, ``/v1/invoices/{id}``, ``/v1/inventory`` and ``/v1/chain/verify``:
what ``invoices list|show``, ``report inventory`` and ``verify`` print, with scope and
roles."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from sqlalchemy import text

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer, same_as_cli, without_freshness
from tests.support.clis import CliCall

PROBLEM = "application/problem+json"


def test_invoices_as_the_cli_lists_and_shows_them(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    headers = bearer(tokens["finance"])
    response = dispatched.get("/v1/invoices", headers=headers)
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert same_as_cli(items, json.loads(cli("invoices", "list", "--format", "json")))
    assert [(i["workspace"], i["period"], i["total_minor"]) for i in items] == [
        ("ws-a", "2026-11", 480), ("ws-b", "2026-11", 240), ("ws-c", "2026-11", 240)
    ]  # fmt: skip
    assert (items[0]["scale"], items[0]["total_display"]) == (2, "4.80 USD")
    b = items[1]["invoice_id"]
    one = dispatched.get(f"/v1/invoices/{b}", headers=headers)
    assert one.status_code == 200, one.text
    shown = one.json()
    assert same_as_cli(shown, json.loads(cli("invoices", "show", b, "--format", "json")))
    (line,) = shown["lines"]
    assert (line["amount_minor"], line["amount_display"]) == (240, "2.40 USD")
    assert shown["credit_notes"] == [] and shown["workspace"] == "ws-b"
    # filters and a page at a time
    only = dispatched.get(
        "/v1/invoices", params={"workspace": "ws-c", "status": "issued"}, headers=headers
    ).json()
    assert [i["workspace"] for i in only["items"]] == ["ws-c"]
    none = dispatched.get("/v1/invoices", params={"status": "voided"}, headers=headers).json()
    assert without_freshness(none) == {"items": [], "next_cursor": None}
    first = dispatched.get("/v1/invoices", params={"limit": 2}, headers=headers).json()
    rest = dispatched.get(
        "/v1/invoices", params={"limit": 2, "cursor": first["next_cursor"]}, headers=headers
    ).json()
    assert first["items"] + rest["items"] == items and rest["next_cursor"] is None
    assert dispatched.get("/v1/invoices?period=2026-13", headers=headers).status_code == 422
    assert dispatched.get("/v1/invoices?status=paid", headers=headers).status_code == 422


def test_a_workspace_token_reads_its_invoices_only(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    mine = dispatched.get("/v1/invoices", headers=bearer(tokens["lead-ac"])).json()["items"]
    assert [i["workspace"] for i in mine] == ["ws-a", "ws-c"]
    asked = dispatched.get("/v1/invoices?workspace=ws-b", headers=bearer(tokens["lead-a"]))
    assert asked.json()["items"] == []
    every = dispatched.get("/v1/invoices", headers=bearer(tokens["admin"])).json()["items"]
    b = next(i["invoice_id"] for i in every if i["workspace"] == "ws-b")
    hidden = dispatched.get(f"/v1/invoices/{b}", headers=bearer(tokens["lead-a"]))
    assert hidden.status_code == 404 and hidden.headers["content-type"] == PROBLEM
    assert hidden.json()["detail"] == f"no invoice {b!r}"
    assert dispatched.get(f"/v1/invoices/{b}", headers=bearer(tokens["lead-b"])).status_code == 200


def test_inventory_is_the_report_for_every_role(
    dispatched: TestClient, tokens: dict[str, str], cli: CliCall
) -> None:
    for group_by in ("pool", "node,flavor", ""):
        expected = json.loads(
            cli("report", "inventory", "--group-by", group_by, "--format", "json")
        )
        for role in ("admin", "lead-a"):
            response = dispatched.get(
                "/v1/inventory", params={"group_by": group_by}, headers=bearer(tokens[role])
            )
            assert response.status_code == 200, response.text
            assert without_freshness(response.json()) == {"items": expected, "next_cursor": None}
    (pool,) = dispatched.get("/v1/inventory", headers=bearer(tokens["admin"])).json()["items"]
    assert (pool["pool"], pool["nodes"], pool["gpus"]) == ("pool-x", 1, 8)
    then = dispatched.get(
        "/v1/inventory", params={"at": "2026-10-01T00:00:00Z"}, headers=bearer(tokens["admin"])
    )
    assert then.json()["items"] == []
    bad = dispatched.get("/v1/inventory?group_by=rack", headers=bearer(tokens["admin"]))
    assert bad.status_code == 400 and "rack" in bad.json()["detail"]


def test_chain_verification_for_admin_and_auditor_only(
    dispatched: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    expected = store.verify()
    assert expected.ok and expected.checked == store.head_position()
    for role in ("admin", "auditor"):
        response = dispatched.get("/v1/chain/verify", headers=bearer(tokens[role]))
        assert response.status_code == 200, response.text
        assert response.json() == {
            "ok": True,
            "events_checked": expected.checked,
            "first_break": None,
            "detail": None,
        }
    for role in ("finance", "lead-a", "lead-b"):
        refused = dispatched.get("/v1/chain/verify", headers=bearer(tokens[role]))
        assert refused.status_code == 403, role
        assert refused.headers["content-type"] == PROBLEM
        assert refused.json()["detail"] == "this route needs the role admin or auditor"


def test_a_broken_chain_names_its_first_break(
    dispatched: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    with store.engine.begin() as conn:
        # the store refuses updates through its trigger; a superuser can switch it off
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        conn.execute(text("UPDATE events SET hash = sha256(hash) WHERE position = 3"))
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))
    body = dispatched.get("/v1/chain/verify", headers=bearer(tokens["auditor"])).json()
    assert (body["ok"], body["events_checked"], body["first_break"]) == (False, 2, 3)
    assert "hash mismatch at position 3" in body["detail"]


def test_one_invoices_lines_as_csv(dispatched: TestClient, tokens: dict[str, str]) -> None:
    headers = bearer(tokens["finance"])
    every = dispatched.get("/v1/invoices", headers=headers).json()["items"]
    a = next(i["invoice_id"] for i in every if i["workspace"] == "ws-a")
    lines = dispatched.get(f"/v1/invoices/{a}", headers=headers).json()["lines"]
    response = dispatched.get(f"/v1/invoices/{a}", headers={**headers, "Accept": "text/csv"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"] == f'attachment; filename="invoice-{a}.csv"'
    header, *rows = response.text.splitlines()
    assert header.split(",") == list(lines[0]) and len(rows) == len(lines) == 1
    assert "4.80 USD" in rows[0]  # ws-a ran two GPU-hours at 2.40
