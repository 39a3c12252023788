"""The event centre end to end: rules applied from a file, facts matched into queued
notifications, delivered to a real HTTP receiver on loopback that verifies each Standard
Webhooks signature; retries keep the webhook-id; apprise channels; budget notes."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from consumers.notifications import send_due, step
from consumers.notifications.matcher import match
from dlc_ledger.services.notifications import apply_rules_file, delivery_rows, retry, rule_rows
from dlc_ledger.services.quotas import apply_quota_file
from ledger.envelopes import Envelope, EventData, make_envelope
from ledger.errors import Invalid
from ledger.events import (
    JobFailed,
    JobPreempted,
    JobQueued,
    JobSubmitted,
    JobSucceeded,
    NotificationQueued,
)
from ledger.ids import fact_event_id
from ledger.notifications import RetryPolicy
from ledger.store.postgres import PostgresEventStore
from projections.registry import catch_up_all
from tests.consumers.notifications.receiver import Receiver
from tests.support.grants import grant

T0 = datetime(2027, 1, 5, tzinfo=UTC)
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
TREE = """
quotas:
  - name: root
    min: {gpu/any: 4000}
  - name: ls
    parent: root
    min: {gpu/any: 2000}
    workspaces: [ws-a]
  - name: other
    parent: root
    min: {gpu/any: 2000}
    workspaces: [ws-b]
"""


def _job(uid: str, data: EventData, at: datetime, what: str) -> Envelope:
    return make_envelope(
        data,
        event_id=fact_event_id("test", "Job", uid, what),
        stream=f"job/{uid}",
        occurred_at=at,
        observed_at=at,
        source="kube-watcher/test",
    )


def _submit(uid: str, name: str, workspace: str, at: datetime) -> list[Envelope]:
    return [
        _job(
            uid,
            JobSubmitted(job_uid=uid, name=name, workspace=workspace, user="alice"),
            at,
            "submitted",
        ),
        _job(uid, JobQueued(job_uid=uid), at, "queued"),
    ]


def _rules(url: str, events: str = "[JobFailed, JobSucceeded]", extra: str = "") -> str:
    return f"""
rules:
  - name: failures
    workspace: ws-a
    events: {events}
    filters: {{job_name: "train-*"}}
    {extra}
    target: {{webhook: "{url}", secret_env: LS_HOOK}}
"""


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LS_HOOK", SECRET)


def _until_idle(store: PostgresEventStore, at: datetime = T0) -> int:
    delivered = 0
    for _ in range(20):
        matched, sent = step(store, at)
        delivered += len(sent.delivered)
        if not matched.queued and not sent.attempted:
            return delivered
    raise AssertionError("the event centre did not settle")


def _setup(store: PostgresEventStore) -> None:
    apply_quota_file(store, TREE, principal="test", at=T0 - timedelta(days=1))
    grant(store, "ws-a", "LS_HOOK")
    grant(store, "ws-b", "TEAM_CHAT")


def test_a_matching_fact_is_delivered_once_signed(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    applied = apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    assert applied.lines == [
        f"set rule failures of ws-a: JobFailed, JobSucceeded -> webhook:{receiver.url}"
    ]
    assert apply_rules_file(store, _rules(receiver.url), principal="test").lines == []
    store.append(
        [
            *_submit("j1", "train-1", "ws-a", T0),
            _job("j1", JobFailed(job_uid="j1", reason="OOMKilled"), T0 + timedelta(1), "failed"),
            *_submit("j2", "eval-2", "ws-a", T0),  # its name does not match the filter
            _job("j2", JobSucceeded(job_uid="j2"), T0 + timedelta(1), "succeeded"),
            *_submit("j3", "train-3", "ws-b", T0),  # another workspace
            _job("j3", JobFailed(job_uid="j3"), T0 + timedelta(1), "failed"),
        ]
    )
    assert _until_idle(store) == 1
    (hit,) = receiver.received
    verified = Webhook(SECRET).verify(hit.body, hit.headers)
    assert verified["type"] == "job.failed"
    data = verified["data"]
    assert (data["job_uid"], data["job_name"], data["workspace"], data["reason"]) == (
        "j1",
        "train-1",
        "ws-a",
        "OOMKilled",
    )
    tampered = hit.body.replace(b"OOMKilled", b"Completed")
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered, hit.headers)
    stale = {**hit.headers, "webhook-timestamp": str(int(T0.timestamp()))}
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(hit.body, stale)
    (row,) = delivery_rows(store)
    assert row["status"] == "delivered" and row["attempts"] == 1
    assert row["notification_id"] == hit.headers["webhook-id"]
    assert _until_idle(store) == 0 and len(receiver.received) == 1  # nothing twice
    assert store.read_by_type(["NotificationDelivered"])[0].data["attempts"] == 1


def test_retries_keep_the_webhook_id_and_honour_retry_after(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    store.append(
        [*_submit("j1", "train-1", "ws-a", T0), _job("j1", JobFailed(job_uid="j1"), T0, "failed")]
    )
    receiver.answers = [500, 503]
    receiver.retry_after = "120"
    with store.transaction() as uow:
        match(uow, T0)
    clock = [datetime.now(UTC)]
    policy = RetryPolicy(base=timedelta(seconds=1), max_attempts=5)
    assert send_due(store, now=lambda: clock[0], policy=policy).retried
    assert not send_due(store, now=lambda: clock[0], policy=policy).attempted  # waits
    clock[0] += timedelta(seconds=119)
    assert not send_due(store, now=lambda: clock[0], policy=policy).attempted  # Retry-After
    clock[0] += timedelta(seconds=2)
    assert send_due(store, now=lambda: clock[0], policy=policy).retried
    clock[0] += timedelta(seconds=200)
    assert send_due(store, now=lambda: clock[0], policy=policy).delivered
    ids = {r.headers["webhook-id"] for r in receiver.received}
    assert len(receiver.received) == 3 and len(ids) == 1
    for hit in receiver.received:  # each attempt signed at its own (fake, future) instant
        signed_at = datetime.fromtimestamp(int(hit.headers["webhook-timestamp"]), UTC)
        expected = Webhook(SECRET).sign(hit.headers["webhook-id"], signed_at, hit.body)
        assert hit.headers["webhook-signature"] == expected


def test_a_job_s_notifications_arrive_in_order_after_an_outage(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url, "[JobQueued, JobFailed]"), principal="test", at=T0)
    store.append(
        [
            *_submit("j1", "train-1", "ws-a", T0),
            _job("j1", JobFailed(job_uid="j1"), T0 + timedelta(hours=1), "failed"),
        ]
    )
    receiver.answers = [500] * 4  # down for a while
    with store.transaction() as uow:
        match(uow, T0)
    clock = [datetime.now(UTC)]
    policy = RetryPolicy(base=timedelta(seconds=1), max_attempts=10)
    for _ in range(8):
        send_due(store, now=lambda: clock[0], policy=policy)
        clock[0] += timedelta(minutes=20)
    types = [r.json()["type"] for r in receiver.received]
    assert types[-2:] == ["job.queued", "job.failed"] and "job.failed" not in types[:-1]


def test_give_up_then_retry_by_hand(store: PostgresEventStore, receiver: Receiver) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    store.append(
        [*_submit("j1", "train-1", "ws-a", T0), _job("j1", JobFailed(job_uid="j1"), T0, "failed")]
    )
    receiver.answers = [503, 503]
    with store.transaction() as uow:
        match(uow, T0)
    policy = RetryPolicy(base=timedelta(0), max_attempts=2)
    clock = [datetime.now(UTC)]
    send_due(store, now=lambda: clock[0], policy=policy)
    clock[0] += timedelta(seconds=1)
    assert send_due(store, now=lambda: clock[0], policy=policy).failed
    (row,) = delivery_rows(store, failed=True)
    assert row["attempts"] == 2 and row["last_error"] == "HTTP 5xx"
    assert store.read_by_type(["NotificationFailed"])
    assert retry(store, row["notification_id"]) == "failed"
    assert send_due(store, now=lambda: clock[0], policy=policy).delivered


def test_apprise_channels_and_budget_notes(
    store: PostgresEventStore, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(store)
    monkeypatch.setenv("TEAM_CHAT", receiver.url.replace("http://", "json://"))
    apply_rules_file(
        store,
        """
rules:
  - name: money
    workspace: ws-b
    events: [BudgetExceeded]
    target: {apprise_env: TEAM_CHAT}
""",
        principal="test",
        at=T0,
    )
    note = NotificationQueued(
        notification_id="budget-1",
        target="workspace/ws-b",
        subject="budget exceeded: workspace ws-b, 2027-01",
        body={"period": "2027-01"},
    )
    store.append(
        [
            make_envelope(
                note,
                event_id=fact_event_id("t", "n", "1", "q"),
                stream="budget/ws-b",
                occurred_at=T0,
                observed_at=T0,
                source="scheduler",
            )
        ]
    )
    assert _until_idle(store) == 1
    (hit,) = receiver.received
    sent = hit.json()  # apprise's JSON format: title, message
    assert "ws-b" in sent["title"] and '"budget.exceeded"' in sent["message"]


def test_time_based_rules_fire_on_cluster_time(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(
        store,
        _rules(receiver.url, "[JobWaitingTooLong]", "waiting_longer_than: 30m"),
        principal="test",
        at=T0,
    )
    store.append(_submit("j1", "train-1", "ws-a", T0))
    catch_up_all(store)
    assert _until_idle(store, T0 + timedelta(minutes=20)) == 0
    assert _until_idle(store, T0 + timedelta(minutes=40)) == 1
    assert _until_idle(store, T0 + timedelta(hours=5)) == 0  # once per wait
    (hit,) = receiver.received
    assert hit.json()["type"] == "job.waiting_too_long"
    assert hit.json()["data"]["occurred_at"] == "2027-01-05T00:30:00Z"


def test_a_bad_rule_is_refused_with_the_known_names(store: PostgresEventStore) -> None:
    _setup(store)
    for text, words in (
        (
            _rules("http://x/h", "[JobExploded]"),
            "rule 'failures' of ws-a.events: unknown event(s) 'JobExploded' (known: JobQueued",
        ),
        (_rules("http://x/h").replace("ws-a", "ws-nope"), "workspace: unknown workspace 'ws-nope'"),
        (
            _rules("http://x/h", "[JobWaitingTooLong]"),
            "rule 'failures' of ws-a.waiting_longer_than: event JobWaitingTooLong needs it",
        ),
        (_rules("http://x/h").replace(", secret_env: LS_HOOK", ""), "needs secret_env"),
        (_rules("http://x/h").replace("job_name", "quota: nope, job_name"), "unknown quota 'nope'"),
    ):
        with pytest.raises(Invalid, match=words.replace("(", r"\(").replace(")", r"\)")):
            apply_rules_file(store, text, principal="test", at=T0)
    assert rule_rows(store) == []
    assert os.environ["LS_HOOK"] == SECRET


def test_a_preemption_storm_is_one_summary_message(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    _setup(store)
    apply_rules_file(store, _rules(receiver.url, "[JobPreempted]"), principal="test", at=T0)
    storm = []
    for i in range(30):
        uid = f"p{i:02d}"
        storm += [
            *_submit(uid, f"train-{i}", "ws-a", T0),
            _job(uid, JobPreempted(job_uid=uid), T0 + timedelta(minutes=1), "preempted"),
        ]
    store.append(storm)
    assert _until_idle(store) == 30  # every notification delivered...
    (hit,) = receiver.received  # ... in one message
    summary = Webhook(SECRET).verify(hit.body, hit.headers)
    assert summary["type"] == "notifications.summary" and summary["data"]["count"] == 30
    assert {n["type"] for n in summary["data"]["notifications"]} == {"job.preempted"}
    assert {r["status"] for r in delivery_rows(store)} == {"delivered"}


def test_two_rules_matching_one_fact_queue_one_notification_each(
    store: PostgresEventStore, receiver: Receiver, second: Receiver
) -> None:
    """A notification's id names its rule: two rules of one workspace on one fact are two
    notifications (the outbox keeps one per id, so one id for both would lose one)."""
    _setup(store)
    two = _rules(receiver.url) + _rules(second.url).split("rules:")[1].replace(
        "name: failures", "name: failures-too"
    )
    apply_rules_file(store, two, principal="test", at=T0)
    store.append(
        [*_submit("j1", "train-1", "ws-a", T0), _job("j1", JobFailed(job_uid="j1"), T0, "failed")]
    )
    assert _until_idle(store) == 2
    ids = {receiver.received[0].headers["webhook-id"], second.received[0].headers["webhook-id"]}
    assert len(ids) == 2
    assert sorted(r["rule"] for r in delivery_rows(store)) == ["ws-a/failures", "ws-a/failures-too"]


def test_a_rule_on_invoice_overdue_hears_of_an_unpaid_invoice_once(
    store: PostgresEventStore, receiver: Receiver
) -> None:
    from dlc_ledger.services.billing import publish_price_book, tick
    from tests.support.billing import demo_book, ended, started

    _setup(store)
    apply_rules_file(
        store,
        f"""
rules:
  - name: unpaid
    workspace: ws-a
    events: [InvoiceOverdue]
    target: {{webhook: "{receiver.url}", secret_env: LS_HOOK}}
""",
        principal="test",
        at=datetime(2026, 11, 1, tzinfo=UTC),  # in force when the invoice falls due
    )
    publish_price_book(store, demo_book(), at=T0 - timedelta(days=90))
    start = datetime(2026, 11, 5, tzinfo=UTC)
    store.append([started("a", start), ended("a", start + timedelta(hours=10))])
    (invoice,) = tick(store, datetime(2026, 12, 2, tzinfo=UTC), due_days=30).invoices
    assert _until_idle(store) == 0  # issued, not overdue yet
    assert tick(store, T0, due_days=30).overdue == (invoice,)  # 2027-01-01 was its due day
    tick(store, T0 + timedelta(days=1), due_days=30)
    assert _until_idle(store) == 1
    (hit,) = receiver.received
    body = Webhook(SECRET).verify(hit.body, hit.headers)
    assert body["type"] == "invoice.overdue"
    assert (body["data"]["invoice_id"], body["data"]["open_minor"]) == (invoice, 2400)
    assert body["data"]["workspace"] == "ws-a"
