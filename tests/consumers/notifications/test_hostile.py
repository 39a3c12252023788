"""A tenant's hostile input against the event centre (issue 44): each defect the tenant
found is a test here. Nothing a tenant sends stops the sender or the matcher, reaches
another tenant's secrets or data, or delays another rule's notifications."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from consumers.notifications import send_due, step
from consumers.notifications.matcher import match
from dlc_ledger.services.notifications import (
    apply_rules_file,
    delivery_rows,
    retry,
    revoke_secret,
    rule_rows,
)
from ledger.envelopes import make_envelope
from ledger.errors import Conflict, Invalid
from ledger.events import (
    JobFailed,
    JobStarted,
    NotificationRule,
    NotificationRuleSet,
    PreemptionDecided,
    Victim,
)
from ledger.ids import fact_event_id
from ledger.notifications import MAX_RETRY_AFTER, RetryPolicy
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.consumers.notifications.receiver import Receiver
from tests.consumers.notifications.test_delivery import SECRET, T0, _job, _rules, _setup, _submit
from tests.support.clis import cli_process
from tests.support.grants import grant

OTHER_SECRET = "whsec_" + base64.b64encode(b"another-tenant-secret-0123456789").decode()


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LS_HOOK", SECRET)
    monkeypatch.setenv("B_HOOK", OTHER_SECRET)
    monkeypatch.setenv("ADMIN_HOOK", SECRET)


def _failed(store: PostgresEventStore, uid: str = "j1", at: datetime = T0) -> None:
    store.append(
        [*_submit(uid, f"train-{uid}", "ws-a", at), _job(uid, JobFailed(job_uid=uid), at, "failed")]
    )


def _match(store: PostgresEventStore, at: datetime = T0) -> None:
    with store.transaction() as uow:
        match(uow, at)


def _row(store: PostgresEventStore) -> dict[str, object]:
    (row,) = delivery_rows(store)
    return row


# --- part 1: poison never stops a process; tenant numbers are bounded --------------------


@pytest.mark.parametrize("asked", ["99999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_a_huge_retry_after_is_capped_and_the_sender_goes_on(
    store: PostgresEventStore, receiver: Receiver, asked: str
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    _failed(store)
    _match(store)
    receiver.answers, receiver.retry_after = [503], asked
    now = datetime.now(UTC)
    sent = send_due(store, now=lambda: now)  # before: OverflowError, the sender stopped
    assert len(sent.retried) == 1
    with store.reading() as conn:
        due = conn.execute(text("SELECT next_attempt_at FROM notification_outbox")).scalar_one()
    assert now < due <= now + MAX_RETRY_AFTER
    assert send_due(store, now=lambda: due).delivered


def test_a_rule_stored_before_its_bounds_is_quarantined_and_the_rest_go_on(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    """``waiting_longer_than: 3000000d`` was once accepted: the stored rule overflowed the
    matcher's arithmetic on every round. Now it is a dead letter and the others fire."""
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    poison = NotificationRule.model_validate(
        {
            "name": "forever",
            "workspace": "ws-a",
            "events": ["JobWaitingTooLong"],
            "waiting_longer_than": 3_000_000 * 86_400,
            "target": {"webhook": receiver.url, "secret_env": "LS_HOOK"},
        }
    )
    store.append(
        [
            make_envelope(
                NotificationRuleSet(rule=poison),
                event_id=fact_event_id("t", "rule", "forever", "set"),
                stream="notification-rule/ws-a/forever",
                occurred_at=T0,
                observed_at=T0,
                source="api/old-version",
            )
        ]
    )
    _failed(store)
    catch_up_all(store)
    for _ in range(3):  # round after round: no exception, the good rule delivers
        step(store, T0 + timedelta(hours=1))
    assert len(receiver.received) == 1
    letters = [d for d in store.dead_letters() if d.source == "notifications/matcher"]
    assert letters and "forever" in letters[0].reason and letters[0].count >= 3


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("waiting_longer_than", "3000000d", "waiting_longer_than: a duration from 1s to 366d"),
        ("waiting_longer_than", "99999999999999999999", "waiting_longer_than: a duration"),
        ("waiting_longer_than", 10**20, "waiting_longer_than: a duration from 1s to 366d"),
        ("waiting_longer_than", True, "waiting_longer_than: a duration like"),
        ("running_longer_than", "367d", "running_longer_than: a duration from 1s to 366d"),
        ("expiring_within_days", 10**9, "expiring_within_days: a whole number of days"),
        ("expiring_within_days", "7", "expiring_within_days: a whole number of days"),
    ],
)
def test_limits_are_bounded_and_the_refusal_names_the_rule_and_field(
    store: PostgresEventStore, field: str, value: object, words: str
) -> None:
    _setup(store)
    events = {
        "waiting_longer_than": "JobWaitingTooLong",
        "running_longer_than": "JobRunningTooLong",
        "expiring_within_days": "SubscriptionExpiring",
    }[field]
    shown = repr(value) if isinstance(value, str) else str(value).lower()
    with pytest.raises(Invalid, match=f"rule 'failures' of ws-a.{words}"):
        apply_rules_file(
            store, _rules("http://h.example/x", f"[{events}]", f"{field}: {shown}"), principal="t"
        )


# --- part 2: secrets belong to workspaces ------------------------------------------------


def test_a_rule_may_name_only_a_secret_granted_to_its_workspace(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)  # LS_HOOK granted to ws-a, TEAM_CHAT to ws-b
    b_names_a = _rules(receiver.url).replace("ws-a", "ws-b")
    with pytest.raises(
        Invalid, match=r"target\.secret_env: LS_HOOK is not granted to workspace ws-b"
    ):
        apply_rules_file(store, b_names_a, principal="test", at=T0)
    apprise = (
        "rules:\n- {name: c, workspace: ws-b, events: [JobFailed], target: {apprise_env: LS_HOOK}}"
    )
    with pytest.raises(Invalid, match=r"target\.apprise_env: LS_HOOK is not granted"):
        apply_rules_file(store, apprise, principal="test", at=T0)
    assert rule_rows(store) == []


def test_a_revoked_grant_stops_the_deliveries_that_name_it(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    _failed(store)
    _match(store)
    revoke_secret(store, "ws-a", "LS_HOOK", principal="admin")
    sent = send_due(store)
    assert len(sent.failed) == 1 and receiver.received == []
    assert _row(store)["last_error"] == "LS_HOOK is not granted to workspace ws-a"


# --- part 4: a notification carries only its workspace's data ---------------------------


def test_a_preemption_notification_hides_other_workspaces_victims(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url, "[PreemptionDecided]"), principal="test", at=T0)
    decided = PreemptionDecided(
        preemptor="a-1",
        victims=(
            Victim(job_uid="b-secret-uid", quota="other", reason="InCohortReclamation"),
            Victim(job_uid="a-2", quota="ls", reason="InClusterQueue"),
        ),
        reason="needs capacity",
        quota="ls",
    )
    store.append(
        [
            *_submit("a-1", "train-a1", "ws-a", T0),
            *_submit("a-2", "train-a2", "ws-a", T0),
            *_submit("b-secret-uid", "b-private-name", "ws-b", T0),
            make_envelope(
                decided,
                event_id=fact_event_id("t", "decision", "a-1", "preempt"),
                stream="dispatch/ls",
                occurred_at=T0 + timedelta(minutes=1),
                observed_at=T0 + timedelta(minutes=1),
                source="dispatcher",
            ),
        ]
    )
    for _ in range(3):
        step(store, T0 + timedelta(hours=1))
    (hit,) = receiver.received
    assert b"b-secret-uid" not in hit.body and b"b-private-name" not in hit.body
    assert b'"other"' not in hit.body and b"ws-b" not in hit.body
    data = hit.json()["data"]
    assert data["victims"] == [{"job_uid": "a-2", "quota": "ls", "reason": "InClusterQueue"}]
    assert data["victims_in_other_workspaces"] == [{"reason": "InCohortReclamation", "count": 1}]


# --- part 5: Standard Webhooks semantics --------------------------------------------------


def test_410_disables_the_rule_and_tells_the_admins(
    store: PostgresEventStore, receiver: Receiver, second: Receiver
) -> None:
    _setup(store)
    grant(store, "*", "ADMIN_HOOK")
    admin_rule = f"""
rules:
  - name: endpoints
    workspace: "*"
    events: [RuleDisabled]
    target: {{webhook: "{second.url}", secret_env: ADMIN_HOOK}}
"""
    apply_rules_file(store, admin_rule, principal="test", at=T0)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    receiver.answers = [410]
    _failed(store, "j1")
    for _ in range(3):
        step(store, T0)
    (gone,) = delivery_rows(store, failed=True)
    assert gone["last_error"] == "HTTP 410 Gone" and gone["attempts"] == 1
    (ls,) = [r for r in rule_rows(store) if r["name"] == "failures"]
    assert ls["enabled"] is False and "410 Gone" in ls["disabled_reason"]
    (told,) = second.received  # the admins' rule heard of it
    assert told.json()["type"] == "rule.disabled"
    assert told.json()["data"]["disabled_rule"] == "ws-a/failures"
    _failed(store, "j2")  # a disabled rule queues nothing more
    for _ in range(3):
        step(store, T0)
    assert len(receiver.received) == 1
    again = apply_rules_file(store, _rules(receiver.url), principal="t", at=T0 + timedelta(hours=1))
    assert again.lines and [r["enabled"] for r in rule_rows(store) if r["name"] == "failures"] == [
        True
    ]


@pytest.mark.parametrize(
    ("status", "retried"), [(400, False), (404, False), (422, False), (408, True), (429, True)]
)
def test_a_4xx_fails_at_once_but_408_and_429_are_retried(
    store: PostgresEventStore, receiver: Receiver, status: int, retried: bool
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    _failed(store)
    _match(store)
    receiver.answers = [status]
    sent = send_due(store, policy=RetryPolicy(base=timedelta(0)))
    assert bool(sent.retried) is retried and bool(sent.failed) is not retried
    assert _row(store)["last_error"] == (f"HTTP {status}" if retried else "HTTP 4xx")


def test_one_rule_s_failing_endpoint_delays_no_other_rule(
    store: PostgresEventStore, receiver: Receiver, second: Receiver
) -> None:
    _setup(store)
    two = f"""
rules:
  - name: broken
    workspace: ws-a
    events: [JobQueued, JobFailed]
    target: {{webhook: "{receiver.url}", secret_env: LS_HOOK}}
  - name: working
    workspace: ws-a
    events: [JobQueued, JobFailed]
    target: {{webhook: "{second.url}", secret_env: LS_HOOK}}
"""
    apply_rules_file(store, two, principal="test", at=T0)
    receiver.answers = [503] * 100
    _failed(store)
    _match(store)
    clock = [datetime.now(UTC)]
    for _ in range(3):
        send_due(store, now=lambda: clock[0])
        clock[0] += timedelta(seconds=1)
    assert [r.json()["type"] for r in second.received] == ["job.queued", "job.failed"]
    broken = [r.json()["type"] for r in receiver.received]
    assert broken and set(broken) == {"job.queued"}  # its own order still holds


def test_retrying_a_delivered_notification_is_refused(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    _failed(store)
    _match(store)
    assert send_due(store).delivered
    nid = str(_row(store)["notification_id"])
    with pytest.raises(Conflict, match="was delivered"):
        retry(store, nid)
    assert _row(store)["status"] == "delivered"
    assert not send_due(store).attempted and len(receiver.received) == 1


# --- time-based rules read episodes, not only the status of the moment -------------------


def test_waits_that_end_between_two_looks_are_notified(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(
        store,
        _rules(receiver.url, "[JobWaitingTooLong]", "waiting_longer_than: 30m"),
        principal="test",
        at=T0,
    )
    step(store, T0)  # a first look, before anything waited
    store.append(
        [
            *_submit("long", "train-long", "ws-a", T0),
            _job("long", JobStarted(job_uid="long"), T0 + timedelta(minutes=45), "started"),
            *_submit("short", "train-short", "ws-a", T0),
            _job("short", JobStarted(job_uid="short"), T0 + timedelta(minutes=20), "started"),
        ]
    )
    catch_up_all(store)
    for _ in range(3):  # the next look is long after both waits ended
        step(store, T0 + timedelta(hours=2))
    (hit,) = receiver.received
    data = hit.json()["data"]
    assert data["job_uid"] == "long" and data["occurred_at"] == "2027-01-05T00:30:00Z"
    for _ in range(3):  # nothing twice
        step(store, T0 + timedelta(hours=3))
    assert len(receiver.received) == 1


# --- part 6: a re-apply whose effective time is earlier is refused ------------------------


def test_an_earlier_re_apply_is_refused_not_ignored(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    later = T0 + timedelta(days=30)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=later)
    changed = _rules(receiver.url, "[JobFailed]")
    with pytest.raises(Conflict, match="in force from 2027-02-04T00:00:00Z"):
        apply_rules_file(store, changed, principal="test", at=T0)
    (rule,) = rule_rows(store)
    assert rule["events"] == ["JobFailed", "JobSucceeded"]
    assert apply_rules_file(store, changed, principal="test", at=later).lines
    assert [r["events"] for r in rule_rows(store)] == [["JobFailed"]]


def test_the_test_command_checks_the_grant_and_the_target(
    store: PostgresEventStore, database_url: str, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    sent = cli_process(database_url, "notifications", "test", "failures", "--workspace", "ws-a")
    assert sent.returncode == 0, sent.stderr
    assert len(receiver.received) == 1
    no_loopback = cli_process(
        database_url, "notifications", "test", "failures", "--workspace", "ws-a",
        DLC_WEBHOOK_ALLOW="",
    )  # fmt: skip
    assert no_loopback.returncode == 1 and "resolves to a loopback address" in no_loopback.stderr
    revoke_secret(store, "ws-a", "LS_HOOK", principal="admin")
    refused = cli_process(database_url, "notifications", "test", "failures", "--workspace", "ws-a")
    assert refused.returncode == 1 and "LS_HOOK is not granted to ws-a" in refused.stderr
    assert len(receiver.received) == 1
