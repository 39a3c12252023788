"""No reach inside (issue 44, part 3): a webhook target that is, or resolves to, a loopback,
private, link-local, multicast or metadata address is refused when the rule is applied and
again when it is sent, unless the operator's allow-list names it; redirects are not
followed; a tenant sees the status class and a short reason, never an internal text."""

from __future__ import annotations

import ipaddress
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from consumers.notifications import Message, deliver, send_due
from consumers.notifications.matcher import match
from dlc_ledger.services.notifications import apply_rules_file, delivery_rows
from ledger.errors import Invalid
from ledger.events import JobFailed
from ledger.notifications import AllowList, TargetRefused, check_webhook_url, refused_address
from ledger.store.postgres import PostgresEventStore
from tests.consumers.notifications.receiver import Receiver
from tests.consumers.notifications.test_delivery import SECRET, T0, _job, _rules, _setup, _submit

#: (URL, what the refusal says): the SSRF table of the issue
REFUSED = [
    ("http://127.0.0.1/hook", "loopback"),
    ("http://127.9.9.9:8080/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://localhost:8000/hook", "loopback"),
    ("http://LOCALHOST./hook", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://100.100.100.200/latest/meta-data/", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://10.0.0.1/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://192.168.1.1/hook", "private"),
    ("http://[fc00::1]/hook", "private"),
    ("http://169.254.10.10/hook", "link-local"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://100.64.0.1/hook", "carrier-grade"),
    ("http://user:pw@example.com/hook", "user or password"),
    ("ftp://example.com/hook", "http(s)"),
    ("http:///hook", "no host"),
]


@pytest.mark.parametrize(("url", "words"), REFUSED)
def test_the_ssrf_table_is_refused(url: str, words: str) -> None:
    with pytest.raises(TargetRefused, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_webhook_url(url, AllowList())


def test_public_targets_and_the_allow_list() -> None:
    assert check_webhook_url("https://hooks.example.com/x", AllowList())[1:] == (
        "hooks.example.com",
        443,
    )
    assert check_webhook_url("http://93.184.216.34:8080/x", AllowList())[2] == 8080
    allow = AllowList.parse("10.1.0.0/16, hooks.internal ,::1")
    check_webhook_url("http://10.1.2.3/x", allow)
    check_webhook_url("http://[::1]/x", allow)
    with pytest.raises(TargetRefused):
        check_webhook_url("http://10.2.0.1/x", allow)
    # a name is judged by every address it resolves to, unless the list names it
    loop = ipaddress.ip_address("127.0.0.1")
    public = ipaddress.ip_address("93.184.216.34")
    assert refused_address("hooks.internal", [loop], allow) is None
    assert refused_address("evil.example", [public, loop], AllowList()) is not None
    assert refused_address("fine.example", [public], AllowList()) is None


def _loopback_name() -> str:
    """A host name (not ``localhost``) that this machine resolves to a loopback address."""
    for line in Path("/etc/hosts").read_text().splitlines():
        words = line.split("#")[0].split()
        if len(words) > 1 and words[0].startswith("127."):
            for name in words[1:]:
                if "localhost" not in name:
                    return name
    name = socket.gethostname()
    if ipaddress.ip_address(socket.gethostbyname(name)).is_loopback:
        return name
    pytest.skip("no name on this machine resolves to loopback")


def _message(url: str) -> Message:
    return Message("n-1", f"webhook:{url}", "LS_HOOK", "job.failed", "s", {"event": "JobFailed"})


def test_a_name_resolving_to_loopback_is_refused_at_send_time(receiver: Receiver) -> None:
    port = receiver.server.server_address[1]
    url = f"http://{_loopback_name()}:{port}/hook"
    env = {"LS_HOOK": SECRET}
    refused = deliver(_message(url), datetime.now(UTC), env, AllowList())
    assert not refused.ok and refused.final
    assert refused.error == "refused: the target resolves to a loopback address"
    assert receiver.received == []
    allowed = deliver(_message(url), datetime.now(UTC), env, AllowList.parse("127.0.0.0/8"))
    assert allowed.ok and len(receiver.received) == 1
    # the request went to the address that was checked, with the URL's Host
    assert receiver.received[0].headers["host"] == f"{_loopback_name()}:{port}"


def test_redirects_are_not_followed(receiver: Receiver) -> None:
    inner = Receiver()
    try:
        receiver.answers = [307]
        receiver.location = inner.url
        attempt = deliver(
            _message(receiver.url),
            datetime.now(UTC),
            {"LS_HOOK": SECRET},
            AllowList.parse("127.0.0.1"),
        )
        assert not attempt.ok and attempt.error == "HTTP 3xx" and not attempt.final
        assert len(receiver.received) == 1 and inner.received == []
    finally:
        inner.close()


def test_a_tenant_sees_no_internal_error_text() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    attempt = deliver(
        _message(f"http://127.0.0.1:{port}/hook"),
        datetime.now(UTC),
        {"LS_HOOK": SECRET},
        AllowList.parse("127.0.0.1"),
    )
    assert not attempt.ok and attempt.error == "connection failed"


def test_apply_refuses_and_the_sender_refuses_again(
    store: PostgresEventStore, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Applied while the operator allowed loopback, sent after it took that back: the
    sender checks again, sends nothing, and says why in the tenant's delivery."""
    _setup(store)
    monkeypatch.setenv("LS_HOOK", SECRET)
    monkeypatch.delenv("DLC_WEBHOOK_ALLOW")
    with pytest.raises(Invalid, match=r"target\.webhook: the target resolves to a loopback"):
        apply_rules_file(store, _rules(receiver.url), principal="test", at=T0)
    apply_rules_file(
        store, _rules(receiver.url), principal="test", at=T0, allow=AllowList.parse("127.0.0.1")
    )
    store.append(
        [*_submit("j1", "train-1", "ws-a", T0), _job("j1", JobFailed(job_uid="j1"), T0, "failed")]
    )
    with store.transaction() as uow:
        match(uow, T0)
    sent = send_due(store, now=lambda: datetime.now(UTC) + timedelta(seconds=1))
    assert len(sent.failed) == 1 and receiver.received == []
    (row,) = delivery_rows(store, failed=True)
    assert row["attempts"] == 1
    assert row["last_error"] == "refused: the target resolves to a loopback address"
