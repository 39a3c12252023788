"""Every route of docs/openapi.json, for every role: no token, a forged one or an expired one →
401, workspace A's token never sees workspace B's jobs, events, costs, budgets, quotas, queue,
waits, preemptions or invoices, the global roles see everything, a route limited to some roles is
403 for the others, a write is for the roles it names (403 for the others: the auditor writes
nothing), a metrics token reads ``/metrics`` and nothing else. A route added to the document
without an entry here fails the test."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from consumers.notifications.matcher import match
from dlc_ledger.services.access import create_token
from dlc_ledger.services.billing import record_payment
from dlc_ledger.services.budgets import apply_budget_file
from dlc_ledger.services.notifications import set_rule
from dlc_ledger.services.subscriptions import purchase
from ledger.events import WorkloadCreated
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.support.api import ROLES, bearer
from tests.support.builders import EPOCH, Narrator, replica
from tests.support.grants import grant
from tests.support.paths import ROOT

DOCUMENT = json.loads((ROOT / "docs/openapi.json").read_text())
B_MARKERS = ("ws-b", "b-1")  # any of them in a body: workspace B's data leaked
SAME_FOR_ALL = {"/v1/whoami"}  # shows the caller, no workspace's data
#: one answer for all, no workspace's data: the cluster's capacity, the span of its facts
SHARED = {"/v1/inventory", "/v1/extent"}
BOOKKEEPERS = {"admin", "finance", "auditor"}
#: routes only some roles may use (403 for the others), unscoped
ROLE_LIMITED = {
    "/v1/chain/verify": {"admin", "auditor"},
    "/v1/ledger/balance": BOOKKEEPERS,
    "/v1/ledger/export": BOOKKEEPERS,
    "/v1/ledger/periods": BOOKKEEPERS,
    "/v1/subscriptions": BOOKKEEPERS,
    "/v1/subscriptions/{subscription_id}": BOOKKEEPERS,
    "/v1/resource-groups": BOOKKEEPERS,
    "/v1/resource-groups/{group}": BOOKKEEPERS,
    "/v1/subscription-utilisation": BOOKKEEPERS,
    "/v1/payments": BOOKKEEPERS,
    "/metrics": {"admin", "metrics"},
}
#: the process's own figures: which names they hold depends on what else ran in the process
#: (under `up`, the dispatcher's quota gauges), so only who may read them is checked
PROCESS_WIDE = {"/metrics"}
#: role-limited routes whose allowed roles do read every workspace's data (the books, the
#: subscriptions and who pays them); the others hold none (a resource group names no payer)
ALL_WORKSPACES = {
    "/v1/ledger/balance",
    "/v1/ledger/export",
    "/v1/subscriptions",
    "/v1/subscriptions/{subscription_id}",
    "/v1/payments",
}
#: every documented write, by path and method: the roles it is for (403 for the others)
WRITE_ROLES = {
    ("/v1/subscriptions", "post"): {"admin", "finance"},
    ("/v1/payments", "post"): {"admin", "finance"},
    ("/v1/ledger/periods/{period}/close", "post"): {"admin", "finance"},
    ("/v1/subscriptions/{subscription_id}/renew", "post"): {"admin", "finance"},
    ("/v1/subscriptions/{subscription_id}/cancel", "post"): {"admin", "finance"},
    ("/v1/subscriptions/{subscription_id}/nodes", "post"): {"admin", "finance"},
    ("/v1/subscriptions/{subscription_id}/changes", "post"): {"admin", "finance"},
    ("/v1/subscriptions/{subscription_id}/spec", "post"): {"admin", "finance"},
    # a workspace's rules: an admin, or a token of that workspace (the writes ask for B's)
    ("/v1/notifications/rules/{workspace}/{name}", "put"): {"admin", "workspace:ws-b"},
    ("/v1/notifications/rules/{workspace}/{name}", "delete"): {"admin", "workspace:ws-b"},
    # the variables a workspace's rules may name: an admin's alone
    ("/v1/notifications/secrets/{workspace}/{variable}", "put"): {"admin"},
    ("/v1/notifications/secrets/{workspace}/{variable}", "delete"): {"admin"},
}
WINDOW = "from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z"
WRITES = ("post", "put", "patch", "delete")
#: workspace B's subscription, as a purchase's body (its id holds no B marker, so only
#: the payer names B)
B_SUBSCRIPTION: dict[str, object] = {
    "group": "gpu-g2",
    "spec": "ml.g2.8xlarge",
    "nodes": 1,
    "term": "month",
    "workspace": "ws-b",
    "key": "matrix-b",
}
B_BOUGHT_AT = EPOCH + timedelta(days=1)
B_RULE: dict[str, object] = {
    "events": ["JobStarted"],
    "target": {"webhook": "http://127.0.0.1:9/hook", "secret_env": "B_HOOK"},
}
B_BUDGET = "budgets:\n  - {workspace: ws-b, amount: 1, currency: USD}\n"
#: a write's request: (url, JSON body)
Write = tuple[str, dict[str, object]]


def _b_subscription(store: PostgresEventStore) -> str:
    order = purchase(
        store,
        group="gpu-g2",
        spec="ml.g2.8xlarge",
        nodes=1,
        term="month",
        workspace="ws-b",
        principal="test",
        at=B_BOUGHT_AT,
        key="matrix-b",
    )
    sub_id = order.subscription.subscription_id
    assert not any(marker in sub_id for marker in B_MARKERS), sub_id
    # workspace B's notification rule, and a notification it queued for B's job
    grant(store, "ws-b", "B_HOOK")
    set_rule(store, "ws-b", "b-rule", B_RULE, principal="test", at=EPOCH, admin=True)
    apply_budget_file(store, B_BUDGET, principal="test", at=EPOCH)
    with store.transaction() as uow:
        match(uow, EPOCH + timedelta(days=1))
    return sub_id


def _b_workloads(store: PostgresEventStore) -> None:
    """Workspace B's inference service and notebook (docs/workloads.md)."""
    n = Narrator(salt="matrix-workloads")
    for uid, name, workload, kind in (
        ("svc-b-1", "b-ranker", "service", "Deployment"),
        ("nb-b-1", "b-notebook", "notebook", "StatefulSet"),
    ):
        created = WorkloadCreated(
            job_uid=uid, name=name, workload=workload, kind=kind, workspace="ws-b",
            replica=replica(),
        )  # fmt: skip
        n.tell(created, f"job/{uid}", EPOCH + timedelta(days=1))
    store.append(n.events)
    catch_up_all(store)


def _b_urls(store: PostgresEventStore) -> dict[str, list[str]]:
    """Per documented path that reads (GET), requests that address workspace B's data."""
    sub_id = _b_subscription(store)
    _b_workloads(store)
    with store.engine.connect() as conn:
        event_id = conn.execute(
            text("SELECT event_id FROM events WHERE stream = 'job/b-1' ORDER BY version LIMIT 1")
        ).scalar_one()
        invoice = conn.execute(
            text("SELECT invoice_id FROM billing_invoices WHERE workspace = 'ws-b'")
        ).scalar_one()
    # B's payment: what /v1/payments lists
    record_payment(store, invoice, "0.01", EPOCH + timedelta(days=40), "b-pay", principal="t")
    return {
        "/v1/whoami": ["/v1/whoami"],
        "/v1/jobs": ["/v1/jobs", "/v1/jobs?workspace=ws-b", "/v1/jobs?status=Running"],
        "/v1/jobs/{uid}": ["/v1/jobs/b-1", "/v1/jobs/train-b-1"],
        "/v1/jobs/{uid}/timeline": [
            "/v1/jobs/b-1/timeline",
            "/v1/jobs/train-b-1/timeline?format=csv",
        ],
        "/v1/events/{event_id}": [f"/v1/events/{event_id}"],
        "/v1/streams/{stream}/events": ["/v1/streams/job/b-1/events"],
        "/v1/usage": ["/v1/usage", "/v1/usage?group_by=workspace,job"],
        "/v1/cost": [
            "/v1/cost?source=rated",
            "/v1/cost?group_by=job&source=rated",
            "/v1/cost?group_by=workspace,month&net_credits=true&source=rated",
        ],
        "/v1/cost/top": [
            "/v1/cost/top",
            "/v1/cost/top?by=workspace&n=500&format=csv",
            f"/v1/cost/top?by=job&source=rated&{WINDOW}",
        ],
        "/v1/month-to-date": [
            "/v1/month-to-date",
            "/v1/month-to-date?at=2026-11-15T00:00:00Z&format=csv",
        ],
        "/v1/budgets": ["/v1/budgets", "/v1/budgets?at=2026-11-15T00:00:00Z&format=csv"],
        "/v1/extent": ["/v1/extent"],
        "/v1/quotas/tree": [
            "/v1/quotas/tree",
            f"/v1/quotas/tree?{WINDOW}",
            "/v1/quotas/tree?format=csv",
        ],
        "/v1/quotas/{quota}/series": [
            f"/v1/quotas/q-ws-b/series?{WINDOW}&step=day",
            "/v1/quotas/q-ws-b/series?format=csv",
        ],
        "/v1/queues/{quota}": ["/v1/queues/q-ws-b", "/v1/queues/q-ws-b?format=csv"],
        "/v1/jobs/{uid}/why": ["/v1/jobs/b-1/why", "/v1/jobs/train-b-9/why"],
        "/v1/services": ["/v1/services", "/v1/services?workspace=ws-b&format=csv"],
        "/v1/services/{service_uid}": ["/v1/services/svc-b-1", "/v1/services/nb-b-1"],
        "/v1/notebooks": ["/v1/notebooks", "/v1/notebooks?workspace=ws-b"],
        "/v1/waits": ["/v1/waits", f"/v1/waits?{WINDOW}&format=csv"],
        "/v1/preemptions": ["/v1/preemptions", "/v1/preemptions?format=csv"],
        "/v1/goodput": ["/v1/goodput", "/v1/goodput?by=workspace&format=csv"],
        "/v1/invoices": [
            "/v1/invoices",
            "/v1/invoices?workspace=ws-b",
            "/v1/invoices?period=2026-11&format=csv",
        ],
        "/v1/invoices/{invoice_id}": [
            f"/v1/invoices/{invoice}",
            f"/v1/invoices/{invoice}?format=csv",
        ],
        "/v1/inventory": ["/v1/inventory", "/v1/inventory?group_by=node&format=csv"],
        "/v1/chain/verify": ["/v1/chain/verify"],
        "/v1/ledger/balance": ["/v1/ledger/balance", "/v1/ledger/balance?at=2026-12-15T00:00:00Z"],
        "/v1/ledger/export": [
            "/v1/ledger/export?period=2026-11",
            "/v1/ledger/export?period=2026-11&format=csv",
        ],
        "/v1/ledger/periods": ["/v1/ledger/periods", "/v1/ledger/periods?format=csv"],
        "/v1/notifications/rules": [
            "/v1/notifications/rules",
            "/v1/notifications/rules?workspace=ws-b&format=csv",
        ],
        "/v1/notifications/deliveries": [
            "/v1/notifications/deliveries",
            "/v1/notifications/deliveries?status=queued&format=csv",
        ],
        "/v1/notifications/secrets": [
            "/v1/notifications/secrets",
            "/v1/notifications/secrets?workspace=ws-b&format=csv",
        ],
        "/v1/subscriptions": [
            "/v1/subscriptions",
            "/v1/subscriptions?at=2026-11-15T00:00:00Z&format=csv",
        ],
        "/v1/subscriptions/{subscription_id}": [f"/v1/subscriptions/{sub_id}"],
        "/v1/resource-groups": [
            "/v1/resource-groups",
            "/v1/resource-groups?at=2026-11-15T00:00:00Z&format=csv",
        ],
        "/v1/resource-groups/{group}": ["/v1/resource-groups/gpu-g2"],
        "/v1/subscription-utilisation": [
            "/v1/subscription-utilisation?group_by=workspace",
            "/v1/subscription-utilisation?from=2026-11-01T00:00:00Z&format=csv",
        ],
        "/v1/payments": [
            "/v1/payments",
            f"/v1/payments?invoice={invoice}&format=csv",
        ],
        "/metrics": ["/metrics"],
    }


def _b_writes(sub_id: str, invoice: str) -> dict[tuple[str, str], list[Write]]:
    """Per documented write, dry runs that address workspace B's subscription (an
    allowed role's answer names B; nothing is appended, so every role asks the same)."""
    now = "2026-11-20T00:00:00Z"
    return {
        ("/v1/subscriptions", "post"): [
            (
                "/v1/subscriptions",
                {**B_SUBSCRIPTION, "key": "matrix-b-2", "at": now, "dry_run": True},
            ),
        ],
        ("/v1/subscriptions/{subscription_id}/renew", "post"): [
            (f"/v1/subscriptions/{sub_id}/renew", {"at": now, "dry_run": True}),
        ],
        ("/v1/payments", "post"): [
            (
                "/v1/payments",
                {
                    "invoice_id": invoice,
                    "amount": "1.00",
                    "at": now,
                    "reference": "matrix-b",
                    "dry_run": True,
                },
            ),
        ],
        # the answer names the workspaces whose month the close locks (B's among them)
        ("/v1/ledger/periods/{period}/close", "post"): [
            (
                "/v1/ledger/periods/2026-11/close",
                {"at": "2026-12-01T00:00:00Z", "force": True, "dry_run": True},
            ),
        ],
        ("/v1/notifications/rules/{workspace}/{name}", "put"): [
            ("/v1/notifications/rules/ws-b/b-rule-2?dry_run=true", B_RULE),
            ("/v1/notifications/rules/ws-b/b-rule?dry_run=true", {**B_RULE, "enabled": False}),
        ],
        ("/v1/notifications/rules/{workspace}/{name}", "delete"): [
            ("/v1/notifications/rules/ws-b/b-rule?dry_run=true", {}),
        ],
        ("/v1/notifications/secrets/{workspace}/{variable}", "put"): [
            ("/v1/notifications/secrets/ws-b/B_OTHER_HOOK?dry_run=true", {}),
        ],
        ("/v1/notifications/secrets/{workspace}/{variable}", "delete"): [
            ("/v1/notifications/secrets/ws-b/B_HOOK?dry_run=true", {}),
        ],
        ("/v1/subscriptions/{subscription_id}/nodes", "post"): [
            (
                f"/v1/subscriptions/{sub_id}/nodes",
                {"nodes": 1, "key": "matrix", "at": now, "dry_run": True},
            ),
        ],
        ("/v1/subscriptions/{subscription_id}/changes", "post"): [
            (f"/v1/subscriptions/{sub_id}/changes", {"nodes": 2, "at": now, "dry_run": True}),
        ],
        ("/v1/subscriptions/{subscription_id}/spec", "post"): [
            (
                f"/v1/subscriptions/{sub_id}/spec",
                {
                    "spec": "ml.t4.2xlarge",
                    "group": "gpu-t4-matrix",
                    "key": "matrix",
                    "at": now,
                    "dry_run": True,
                },
            ),
        ],
        ("/v1/subscriptions/{subscription_id}/cancel", "post"): [
            (f"/v1/subscriptions/{sub_id}/cancel", {"at": now, "dry_run": True}),
            (
                f"/v1/subscriptions/{sub_id}/cancel",
                {"immediately": True, "at": now, "dry_run": True},
            ),
        ],
    }


@pytest.fixture
def b_urls(dispatched: TestClient, store: PostgresEventStore) -> dict[str, list[str]]:
    urls = _b_urls(store)
    reads = {path for path, operations in DOCUMENT["paths"].items() if "get" in operations}
    assert set(urls) == reads, "give every documented route its B requests"
    return urls


@pytest.fixture
def b_writes(
    b_urls: dict[str, list[str]], store: PostgresEventStore
) -> dict[tuple[str, str], list[Write]]:
    (sub_url,) = b_urls["/v1/subscriptions/{subscription_id}"]
    (invoice_url, _) = b_urls["/v1/invoices/{invoice_id}"]
    writes = _b_writes(sub_url.rsplit("/", 1)[1], invoice_url.rsplit("/", 1)[1])
    documented = {
        (path, method)
        for path, operations in DOCUMENT["paths"].items()
        for method in operations
        if method in WRITES
    }
    assert set(writes) == set(WRITE_ROLES) == documented, "give every write its roles"
    assert set(b_urls) | {path for path, _ in writes} == set(DOCUMENT["paths"])
    return writes


def _allowed(path: str, role: str) -> bool:
    limited = ROLE_LIMITED.get(path)
    return limited is None or not limited.isdisjoint(ROLES[role])


def _sees_b(response: httpx.Response) -> bool:
    if response.headers["content-type"] == "application/problem+json":
        # a problem names only what the request itself said (its path, the uid asked for)
        assert set(response.json()) <= {"type", "title", "status", "detail", "instance"}
        return False
    return any(marker in response.text for marker in B_MARKERS)


def test_no_token_and_bad_tokens_get_401_everywhere(
    dispatched: TestClient,
    b_urls: dict[str, list[str]],
    b_writes: dict[tuple[str, str], list[Write]],
    tokens: dict[str, str],
) -> None:
    forged: list[dict[str, str]] = [{}, bearer("dlct_forged"), bearer(tokens["admin"] + "x")]
    for path, urls in b_urls.items():
        for method in DOCUMENT["paths"][path]:
            for url in urls:
                for headers in forged:
                    response = dispatched.request(method, url, headers=headers)
                    assert response.status_code == 401, (method, url, headers)
                    assert not _sees_b(response)
    for (_, method), requests in b_writes.items():
        for url, body in requests:
            for headers in forged:
                response = dispatched.request(method, url, json=body, headers=headers)
                assert response.status_code == 401, (method, url, headers)
                assert not _sees_b(response)


def test_an_expired_token_gets_401_everywhere(
    dispatched: TestClient,
    b_urls: dict[str, list[str]],
    b_writes: dict[tuple[str, str], list[Write]],
    store: PostgresEventStore,
) -> None:
    """Whatever its roles: an expired token is refused before any route looks at them."""
    made = datetime.now(UTC) - timedelta(days=1)
    expired = {
        role: create_token(
            store, roles, name=f"old-{role}", created_by="test", now=made,
            expires_in=timedelta(hours=1),
        )
        for role, roles in {**ROLES, "metrics": ["metrics"]}.items()
    }  # fmt: skip
    requests: list[tuple[str, str, dict[str, object] | None]] = [
        (method, url, None)
        for path, urls in b_urls.items()
        for method in DOCUMENT["paths"][path]
        for url in urls
    ]
    requests += [
        (method, url, body) for (_, method), writes in b_writes.items() for url, body in writes
    ]
    for role, token in expired.items():
        for method, url, body in requests:
            response = dispatched.request(method, url, json=body, headers=bearer(token.secret))
            assert response.status_code == 401, (role, method, url)
            assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            detail = response.json()["detail"]
            assert detail.startswith(f"token {token.token.token_id} expired at "), detail
            assert not _sees_b(response)


def test_a_metrics_token_reads_metrics_and_nothing_else(
    dispatched: TestClient,
    b_urls: dict[str, list[str]],
    b_writes: dict[tuple[str, str], list[Write]],
    store: PostgresEventStore,
) -> None:
    scraper = bearer(create_token(store, ["metrics"], name="prom", created_by="test").secret)
    head = store.head_position()
    for path, urls in b_urls.items():
        for method in DOCUMENT["paths"][path]:
            for url in urls:
                response = dispatched.request(method, url, headers=scraper)
                expected = 200 if path == "/metrics" else 403
                assert response.status_code == expected, (method, url, response.text)
                if path != "/metrics":
                    assert not _sees_b(response)
    for (_, method), writes in b_writes.items():
        for url, body in writes:
            response = dispatched.request(method, url, json=body, headers=scraper)
            assert response.status_code == 403, (method, url)
            assert not _sees_b(response)
    assert store.head_position() == head


def test_workspace_a_never_sees_workspace_b(
    dispatched: TestClient, b_urls: dict[str, list[str]], tokens: dict[str, str]
) -> None:
    for path, urls in b_urls.items():
        for url in urls:
            for role in ("lead-a", "lead-ac"):
                response = dispatched.get(url, headers=bearer(tokens[role]))
                expected = (200, 404) if _allowed(path, role) else (403,)
                assert response.status_code in expected, (role, url, response.text)
                assert not _sees_b(response), (role, url, response.text)
            if path in SHARED:  # everyone reads the same answer, no workspace's data in it
                answers = {dispatched.get(url, headers=bearer(tokens[r])).text for r in ROLES}
                (answer,) = answers
                assert not any(marker in answer for marker in B_MARKERS), url
                continue
            if path in ROLE_LIMITED:  # the allowed roles read it; the others get a 403
                for role in ROLES:
                    response = dispatched.get(url, headers=bearer(tokens[role]))
                    allowed = _allowed(path, role)
                    assert response.status_code == (200 if allowed else 403), role
                    if path in PROCESS_WIDE:
                        continue
                    # the books hold B's receivable for the roles allowed (the check can fail)
                    assert _sees_b(response) == (allowed and path in ALL_WORKSPACES), (role, url)
                continue
            # the same request does reach B's data for B and the global roles, so the
            # check above can fail
            readers = (
                ["lead-b"] if path in SAME_FOR_ALL else ["lead-b", "admin", "finance", "auditor"]
            )
            for role in readers:
                response = dispatched.get(url, headers=bearer(tokens[role]))
                assert response.status_code == 200, (role, url, response.text)
                assert _sees_b(response), (role, url)


def test_a_scoped_list_holds_exactly_its_workspaces(
    client: TestClient, tokens: dict[str, str]
) -> None:
    seen = client.get("/v1/jobs", headers=bearer(tokens["lead-ac"])).json()["items"]
    assert sorted(j["job_uid"] for j in seen) == ["a-1", "a-2", "c-1"]
    paged = client.get("/v1/jobs?limit=1", headers=bearer(tokens["lead-a"])).json()
    assert [j["job_uid"] for j in paged["items"]] == ["a-2"]
    rest = client.get(
        "/v1/jobs", params={"cursor": paged["next_cursor"]}, headers=bearer(tokens["lead-a"])
    ).json()
    assert [j["job_uid"] for j in rest["items"]] == ["a-1"] and rest["next_cursor"] is None


def test_the_auditor_reads_and_writes_nothing(
    dispatched: TestClient,
    b_urls: dict[str, list[str]],
    b_writes: dict[tuple[str, str], list[Write]],
    tokens: dict[str, str],
) -> None:
    headers = bearer(tokens["auditor"])
    for path, urls in b_urls.items():
        documented = DOCUMENT["paths"][path]
        assert "get" in documented
        for url in urls:
            expected = 200 if _allowed(path, "auditor") else 403  # /metrics: not an auditor's
            assert dispatched.get(url, headers=headers).status_code == expected, url
        for method in WRITES:
            for url in urls:
                response = dispatched.request(method, url, headers=headers)
                expected = 403 if method in documented else 405
                assert response.status_code == expected, (method, url)
                assert response.headers["content-type"] == "application/problem+json"
    for (path, _), requests in b_writes.items():
        if path in b_urls:  # a route that reads too: its writes were asked above
            continue
        documented = DOCUMENT["paths"][path]
        for method in ("get", *WRITES):
            for url, body in requests:
                response = dispatched.request(method, url, json=body, headers=headers)
                expected = 403 if method in documented else 405
                assert response.status_code == expected, (method, url)
                assert response.headers["content-type"] == "application/problem+json"


def test_writes_are_for_their_roles_only(
    dispatched: TestClient,
    b_writes: dict[tuple[str, str], list[Write]],
    tokens: dict[str, str],
    store: PostgresEventStore,
) -> None:
    head = store.head_position()
    for (path, method), requests in b_writes.items():
        for url, body in requests:
            for role in ROLES:
                response = dispatched.request(method, url, json=body, headers=bearer(tokens[role]))
                allowed = not WRITE_ROLES[(path, method)].isdisjoint(ROLES[role])
                assert response.status_code == (200 if allowed else 403), (role, url, body)
                if allowed:
                    assert response.json()["dry_run"] is True, response.text
                # an allowed role's answer names B's subscription (so the check can fail)
                assert _sees_b(response) == allowed, (role, url)
    assert store.head_position() == head  # dry runs, every one


def test_the_chain_is_verified_by_admin_and_auditor_only(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    for role in ROLES:
        response = dispatched.get("/v1/chain/verify", headers=bearer(tokens[role]))
        if role in ("admin", "auditor"):
            assert response.status_code == 200 and response.json()["ok"] is True, role
        else:
            assert response.status_code == 403, role
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["status"] == 403


def test_a_decision_across_workspaces_names_only_the_readers_jobs(
    dispatched: TestClient, tokens: dict[str, str]
) -> None:
    # a-2 (ws-a) preempted b-1 (ws-b): each lead reads its own job's side of it
    a2 = dispatched.get("/v1/jobs/a-2", headers=bearer(tokens["lead-a"]))
    assert a2.status_code == 200 and not _sees_b(a2), a2.text
    (decision,) = [t for t in a2.json()["timeline"] if t["type"] == "PreemptionDecided"]
    assert decision["summary"] == "preempts 1 job(s) ((a job of another workspace)): Reclaim"
    b1 = dispatched.get("/v1/jobs/b-1", headers=bearer(tokens["lead-b"])).json()
    (victim,) = [t for t in b1["timeline"] if t["type"] == "PreemptionDecided"]
    assert victim["by"] == "(a job of another workspace)"
    assert victim["summary"] == "chosen as preemption victim for job (a job of another workspace)"
    assert "a-2" not in str(b1)
    # and so does the timeline's own list, in JSON and CSV
    listed = dispatched.get("/v1/jobs/b-1/timeline", headers=bearer(tokens["lead-b"])).json()
    assert listed["items"] == b1["timeline"] and listed["next_cursor"] is None
    as_csv = dispatched.get(
        "/v1/jobs/a-2/timeline?format=csv", headers=bearer(tokens["lead-a"])
    ).text
    assert "Reclaim" in as_csv and "b-1" not in as_csv
    # the global roles read the decision as recorded
    whole = dispatched.get("/v1/jobs/a-2", headers=bearer(tokens["auditor"])).json()
    (seen,) = [t for t in whole["timeline"] if t["type"] == "PreemptionDecided"]
    assert seen["summary"] == "preempts 1 job(s) (b-1): Reclaim"
