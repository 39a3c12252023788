"""Rule files and rule routes are a tenant's input (issue 44, part 6): the YAML loader
refuses anchors and aliases and files over 1 MB, and every malformed field is an
``Invalid`` (400, exit 1) naming the rule and the field, never a 500 or a traceback.
Hypothesis throws documents shaped like rule files, and plain text, at the parser."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc_ledger.api.app import create_app
from dlc_ledger.services.access import create_token
from dlc_ledger.services.yaml_files import YamlError, load_yaml
from ledger.notifications import MAX_RULES, AllowList, RuleFileError, rules_from_document
from ledger.store.postgres import PostgresEventStore
from tests.consumers.notifications.test_delivery import _setup
from tests.support.api import bearer
from tests.support.clis import cli_process
from tests.support.grants import grant

WORKSPACES = {"ws-a", "ws-b"}
QUOTAS = {"ls", "other"}
GRANTS = {"ws-a": frozenset({"LS_HOOK"})}

BILLION_LAUGHS = "\n".join(
    ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(
        ["ws-a", "*", "JobFailed", "JobWaitingTooLong", "30m", "3000000d", "LS_HOOK", "ls"]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "name",
    "workspace",
    "scope",
    "user",
    "events",
    "filters",
    "target",
    "enabled",
    "waiting_longer_than",
    "running_longer_than",
    "expiring_within_days",
]
rules = st.dictionaries(st.sampled_from(FIELDS), values, max_size=8) | values
documents = st.fixed_dictionaries({"rules": st.lists(rules, max_size=3)}) | values


@given(documents)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_document_is_rules_or_a_rule_file_error(document: Any) -> None:
    try:
        parsed = rules_from_document(
            document, workspaces=WORKSPACES, quotas=QUOTAS, grants=GRANTS, allow=AllowList()
        )
    except RuleFileError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(rule.workspace in WORKSPACES for rule in parsed.values())


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_is_yaml_or_a_yaml_error(text: str) -> None:
    with contextlib.suppress(YamlError):
        load_yaml(text, tenant=True)


def test_the_loader_refuses_anchors_aliases_and_large_files() -> None:
    started = time.monotonic()
    with pytest.raises(YamlError, match="anchors and aliases"):
        load_yaml(BILLION_LAUGHS, tenant=True)
    assert time.monotonic() - started < 1  # before: 56 s into a MemoryError
    with pytest.raises(YamlError, match="larger than 1,000,000 bytes"):
        load_yaml("rules: []\n" + "#" * 1_000_001, tenant=True)
    too_many = {"rules": [{"name": f"r{i}"} for i in range(MAX_RULES + 1)]}
    with pytest.raises(RuleFileError, match=f"at most {MAX_RULES}"):
        rules_from_document(too_many, workspaces=WORKSPACES, quotas=QUOTAS, grants=GRANTS)


def test_the_cli_refuses_a_billion_laughs_with_exit_1(
    store: PostgresEventStore, database_url: str, tmp_path: Path
) -> None:
    _setup(store)
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS)
    done = cli_process(database_url, "notifications", "apply", str(laughs))
    assert done.returncode == 1 and "anchors and aliases" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("ws-a/bad", {"events": [["JobFailed"]]}, "rule 'bad' of ws-a.events: unknown event"),
        (
            "ws-a/bad",
            {"events": ["JobFailed"], "filters": {"quota": ["ls"]}},
            "rule 'bad' of ws-a.filters.quota: a non-empty string",
        ),
        ("ws-a/a%0Ab", {"events": ["JobFailed"]}, "a rule name is 1-63 lower-case"),
        ("ws-a/UPPER", {"events": ["JobFailed"]}, "a rule name is 1-63 lower-case"),
        (
            "ws-a/bad",
            {"events": ["JobWaitingTooLong"], "waiting_longer_than": "99999999999999999999"},
            "rule 'bad' of ws-a.waiting_longer_than: a duration",
        ),
        (
            "ws-a/bad",
            {"events": ["JobFailed"], "enabled": "yes"},
            "rule 'bad' of ws-a.enabled: true or false",
        ),
        (
            "ws-a/bad",
            {"events": ["JobFailed"], "target": {"webhook": "http://10.0.0.1/", "secret_env": 1}},
            "rule 'bad' of ws-a.target.webhook: the target resolves to a private",
        ),
        (
            "ws-a/bad",
            {"events": ["JobFailed"], "target": {"webhook": "https://h.example/", "secret_env": 1}},
            "rule 'bad' of ws-a.target.secret_env: an environment variable name",
        ),
    ],
)
def test_malformed_rule_fields_are_400_naming_the_field(
    store: PostgresEventStore,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    body: dict[str, Any],
    words: str,
) -> None:
    monkeypatch.delenv("DLC_WEBHOOK_ALLOW")
    _setup(store)
    body = {"target": {"webhook": "https://hooks.example/x", "secret_env": "LS_HOOK"}, **body}
    admin = bearer(create_token(store, ["admin"], name="a", created_by="t").secret)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        answer = client.put(f"/v1/notifications/rules/{path}", json=body, headers=admin)
    assert answer.status_code == 400, answer.text
    assert words in answer.json()["detail"]


def test_grants_are_an_admin_s(store: PostgresEventStore) -> None:
    _setup(store)
    lead = bearer(create_token(store, ["workspace:ws-a"], name="l", created_by="t").secret)
    admin = bearer(create_token(store, ["admin"], name="a", created_by="t").secret)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        denied = client.put("/v1/notifications/secrets/ws-a/WS_B_HOOK", headers=lead)
        assert denied.status_code == 403
        bad = client.put("/v1/notifications/secrets/ws-a/lower", headers=admin)
        assert bad.status_code == 400 and "environment variable name" in bad.json()["detail"]
        unknown = client.put("/v1/notifications/secrets/ws-nope/X", headers=admin)
        assert unknown.status_code == 404 and "unknown workspace" in unknown.json()["detail"]
        made = client.put("/v1/notifications/secrets/ws-a/WS_A_2", headers=admin)
        assert made.status_code == 200 and made.json()["changes"] == ["granted WS_A_2 to ws-a"]
        seen = client.get("/v1/notifications/secrets", headers=lead).json()["items"]
        assert {"workspace": "ws-a", "variable": "WS_A_2"} in seen
        gone = client.delete("/v1/notifications/secrets/ws-a/WS_A_2", headers=admin)
        assert gone.status_code == 200
    grant(store, "ws-a", "LS_HOOK")  # granting twice stores nothing and is no error


def test_a_rule_file_of_the_cli_names_the_rule_and_field(
    store: PostgresEventStore, database_url: str, tmp_path: Path
) -> None:
    _setup(store)
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n- {name: slow, workspace: ws-a, events: [JobWaitingTooLong],"
        " waiting_longer_than: 99999999999999999999d,"
        " target: {webhook: 'https://h.example/x', secret_env: LS_HOOK}}\n"
    )
    done = cli_process(database_url, "notifications", "apply", str(rules))
    assert done.returncode == 1, done.stderr
    assert "rule 'slow' of ws-a.waiting_longer_than: a duration" in done.stderr
    assert "Traceback" not in done.stderr
