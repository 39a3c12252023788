"""``/v1/notifications``: a workspace manages its own rules (the API's role checks on
writes), finance and auditors read only, reads are scoped, PUT is idempotent."""

from __future__ import annotations

from fastapi.testclient import TestClient

from ledger.store.postgres import PostgresEventStore
from tests.support.api import bearer
from tests.support.grants import grant

RULE = {
    "events": ["JobFailed", "JobPreempted"],
    "filters": {"job_name": "train-*"},
    "target": {"webhook": "http://127.0.0.1:9/hook", "secret_env": "WS_A_HOOK"},
}


def test_a_workspace_manages_its_own_rules(
    client: TestClient, tokens: dict[str, str], store: PostgresEventStore
) -> None:
    grant(store, "ws-a", "WS_A_HOOK")
    lead_a = bearer(tokens["lead-a"])
    created = client.put("/v1/notifications/rules/ws-a/failures", json=RULE, headers=lead_a)
    assert created.status_code == 201, created.text
    rule = created.json()["rule"]
    assert rule["events"] == ["JobFailed", "JobPreempted"] and rule["secret_env"] == "WS_A_HOOK"
    again = client.put("/v1/notifications/rules/ws-a/failures", json=RULE, headers=lead_a)
    assert again.status_code == 200 and again.json()["changes"] == []
    for who, path in (
        ("lead-a", "ws-b/x"),
        ("finance", "ws-a/x"),
        ("auditor", "ws-a/x"),
        ("lead-a", "*/x"),
    ):
        denied = client.put(
            f"/v1/notifications/rules/{path}", json=RULE, headers=bearer(tokens[who])
        )
        assert denied.status_code == 403, (who, path, denied.text)
    seen_by_b = client.get("/v1/notifications/rules", headers=bearer(tokens["lead-b"])).json()
    assert seen_by_b["items"] == []
    seen = client.get("/v1/notifications/rules", headers=bearer(tokens["auditor"])).json()
    assert [r["name"] for r in seen["items"]] == ["failures"]
    bad = client.put(
        "/v1/notifications/rules/ws-a/bad", json={**RULE, "events": ["JobExploded"]}, headers=lead_a
    )
    assert bad.status_code == 400 and "unknown event(s) 'JobExploded'" in bad.json()["detail"]
    gone = client.delete("/v1/notifications/rules/ws-a/failures", headers=lead_a)
    assert gone.status_code == 200, gone.text
    missing = client.delete("/v1/notifications/rules/ws-a/failures", headers=lead_a)
    assert missing.status_code == 404
    deliveries = client.get("/v1/notifications/deliveries", headers=lead_a)
    assert deliveries.status_code == 200 and deliveries.json()["items"] == []
