"""Delivering one notification: a signed webhook, or a chat/email message through apprise.

Webhooks follow the Standard Webhooks specification (the ``standardwebhooks`` package
signs): headers ``webhook-id`` (the notification id, the same on every retry, so a
receiver drops repeats), ``webhook-timestamp`` and ``webhook-signature``. The secret is
read from the rule's environment variable at send time, never stored; during a rotation
the variable holds two secrets separated by a space and the message carries both
signatures, so a receiver on either secret verifies it. The body is
``{"type": "job.failed", "timestamp": ..., "data": {...}}`` (docs/notifications.md).
Apprise targets (DingTalk, WeCom, Lark, Slack, Teams, SMTP, JSON, ...) take the URL from
the rule's environment variable and send the subject and the data as text.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["Attempt", "Message", "deliver"]

_CLIENT: Any = None
_CLIENT_LOCK = threading.Lock()


def _client() -> Any:
    """One HTTP client for the process: kept-alive connections, and one TLS context
    (building one per request cost ~30 ms, more than the delivery itself)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            import httpx

            _CLIENT = httpx.Client(timeout=10.0)
        return _CLIENT


@dataclass(frozen=True)
class Message:
    notification_id: str
    target: str  # webhook:<url> | apprise:<ENV>
    secret_env: str | None
    event_type: str
    subject: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class Attempt:
    ok: bool
    error: str = ""
    retry_after: str | None = None  # the receiver's Retry-After header, as sent


def _body(message: Message, now: datetime) -> bytes:
    document = {
        "type": message.event_type,
        "timestamp": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": dict(message.payload),
    }
    return orjson.dumps(document)


def _webhook(message: Message, url: str, env: Mapping[str, str], now: datetime) -> Attempt:
    import httpx
    from standardwebhooks.webhooks import Webhook

    if not message.secret_env or not env.get(message.secret_env):
        return Attempt(False, f"environment variable {message.secret_env} is not set")
    body = _body(message, now)
    signatures = []
    for secret in env[message.secret_env].split():
        try:
            signatures.append(Webhook(secret).sign(message.notification_id, now, body))
        except Exception as exc:  # a malformed secret: say so, never print it
            return Attempt(False, f"bad secret in {message.secret_env}: {type(exc).__name__}")
    headers = {
        "content-type": "application/json",
        "webhook-id": message.notification_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
    try:
        response = _client().post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return Attempt(False, f"{type(exc).__name__}: {exc}"[:500])
    if 200 <= response.status_code < 300:
        return Attempt(True)
    return Attempt(False, f"HTTP {response.status_code}", response.headers.get("retry-after"))


def _apprise(message: Message, variable: str, env: Mapping[str, str], now: datetime) -> Attempt:
    import apprise

    url = env.get(variable)
    if not url:
        return Attempt(False, f"environment variable {variable} is not set")
    sender = apprise.Apprise()
    if not sender.add(url):
        return Attempt(False, f"{variable} holds no URL apprise can send to")
    ok = sender.notify(title=message.subject, body=_body(message, now).decode())
    return Attempt(bool(ok), "" if ok else "apprise could not deliver it")


def deliver(message: Message, now: datetime, env: Mapping[str, str] | None = None) -> Attempt:
    """One attempt at ``message``, at ``now`` (the signature's timestamp)."""
    env = os.environ if env is None else env
    kind, _, where = message.target.partition(":")
    if kind == "webhook":
        return _webhook(message, where, env, now)
    if kind == "apprise":
        return _apprise(message, where, env, now)
    return Attempt(False, f"unknown target {message.target!r}")
