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

A webhook's host is resolved at send time and every address checked
(:mod:`ledger.notifications.targets`: no loopback, private, link-local, multicast or
metadata address unless the operator's allow-list names it); the request then goes to the
address that was checked (``Host`` and the TLS server name stay the URL's), so DNS that
answers differently a moment later is no way in. Redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from ledger.notifications import (
    ALLOW_ENV,
    AllowList,
    TargetRefused,
    check_webhook_url,
    refused_address,
)

log = logging.getLogger(__name__)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

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

            _CLIENT = _never_redirects(httpx.Client(timeout=10.0))
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
    """One attempt's outcome. ``error`` is what the tenant sees in its deliveries: the
    status class and a short reason, never the receiver's body or an internal error text
    (those go to the sender's log, :data:`log`)."""

    ok: bool
    error: str = ""
    retry_after: str | None = None  # the receiver's Retry-After header, as sent
    status: int | None = None  # the HTTP status (None: no answer)
    final: bool = False  # retrying cannot help (a refused target, a missing secret)


def _body(message: Message, now: datetime) -> bytes:
    document = {
        "type": message.event_type,
        "timestamp": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": dict(message.payload),
    }
    return orjson.dumps(document)


def _resolve(host: str, port: int) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _pinned(url: str, allow: AllowList) -> tuple[str, dict[str, str], dict[str, Any]] | Attempt:
    """The URL to connect to (the host replaced by the address that was checked), the
    ``Host`` header and the TLS server name; or the refusal."""
    try:
        scheme, host, port = check_webhook_url(url, allow)
    except TargetRefused as exc:
        return Attempt(False, f"refused: {exc}", final=True)
    try:
        addresses = _resolve(host, port)
    except (OSError, UnicodeError) as exc:
        log.info("webhook %s: %s cannot be resolved: %s", url, host, exc)
        return Attempt(False, "the target's host name does not resolve")
    why = refused_address(host, addresses, allow)
    if why is not None:
        log.warning("webhook %s refused: %s (%s)", url, why, ", ".join(map(str, addresses)))
        return Attempt(False, f"refused: {why}", final=True)
    address = addresses[0]
    parts = urlsplit(url)
    netloc = f"[{address}]" if address.version == 6 else str(address)
    pinned = urlunsplit((scheme, f"{netloc}:{port}", parts.path or "/", parts.query, ""))
    default = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    host_header = host if default else f"{host}:{port}"
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    return pinned, {"host": host_header}, extensions


def _status_text(status: int) -> str:
    if status == 410:
        return "HTTP 410 Gone"
    if status in (408, 429):
        return f"HTTP {status}"
    return f"HTTP {status // 100}xx"


def _webhook(
    message: Message, url: str, env: Mapping[str, str], now: datetime, allow: AllowList
) -> Attempt:
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
    target = _pinned(url, allow)
    if isinstance(target, Attempt):
        return target
    pinned, host_header, extensions = target
    headers = {
        **host_header,
        "content-type": "application/json",
        "webhook-id": message.notification_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
    try:
        response = _client().post(pinned, content=body, headers=headers, extensions=extensions)
    except httpx.TimeoutException as exc:
        log.info("webhook %s: %s", url, exc)
        return Attempt(False, "timed out")
    except httpx.HTTPError as exc:
        log.info("webhook %s: %s: %s", url, type(exc).__name__, exc)
        return Attempt(False, "connection failed")
    if 200 <= response.status_code < 300:
        return Attempt(True, status=response.status_code)
    retry_after = response.headers.get("retry-after")
    return Attempt(
        False,
        _status_text(response.status_code),
        retry_after[:64] if retry_after else None,
        status=response.status_code,
    )


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


def _never_redirects(client: Any) -> Any:
    client.follow_redirects = False  # a redirect is an answer, never a second request
    return client


def deliver(
    message: Message,
    now: datetime,
    env: Mapping[str, str] | None = None,
    allow: AllowList | None = None,
) -> Attempt:
    """One attempt at ``message``, at ``now`` (the signature's timestamp). ``allow``: the
    operator's allow-list of targets inside its network (default: ``DLC_WEBHOOK_ALLOW`` in
    ``env``)."""
    env = os.environ if env is None else env
    kind, _, where = message.target.partition(":")
    if kind == "webhook":
        allowed = allow if allow is not None else AllowList.parse(env.get(ALLOW_ENV))
        return _webhook(message, where, env, now, allowed)
    if kind == "apprise":
        return _apprise(message, where, env, now)
    return Attempt(False, f"unknown target {message.target!r}")
