"""Where a webhook may go: public addresses only, unless an admin allow-list names it.

A tenant writes the URL of its rule's webhook, and the sender runs inside the operator's
network: without a check the sender is a probe into it (``http://10.0.0.1/``, the cloud
metadata service at ``169.254.169.254``, the API itself on loopback). So a target is
checked twice: its URL when the rule is applied (:func:`check_webhook_url`: scheme, no
credentials, a literal address or ``localhost`` refused at once), and every address its
host resolves to when it is sent (:func:`refused_address`, called by the transport, which
then connects to the address it checked, so a name that re-resolves elsewhere between the
check and the connection is no way round it). The allow-list (``DLC_WEBHOOK_ALLOW``: hosts
and CIDR networks, comma-separated) is the operator's, never a tenant's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["ALLOW_ENV", "AllowList", "TargetRefused", "check_webhook_url", "refused_address"]

#: the sender's (and the applying process's) environment variable holding the allow-list
ALLOW_ENV = "DLC_WEBHOOK_ALLOW"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# cloud metadata services that sit on otherwise public-looking addresses
_METADATA = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),
    }
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: an operator's, not public


class TargetRefused(ValueError):
    """A webhook target the sender will not reach; the message is safe to show a tenant."""


@dataclass(frozen=True)
class AllowList:
    """Hosts (exact, lower case) and networks an admin lets webhooks reach inside."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> AllowList:
        hosts: set[str] = set()
        networks = []
        for item in (text or "").replace(" ", ",").split(","):
            item = item.strip().lower().strip("[]")
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def names(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.hosts

    def covers(self, address: IPAddress) -> bool:
        return any(address in n for n in self.networks if n.version == address.version)


def _kind(address: IPAddress) -> str | None:
    """Why ``address`` is not a public one (None: it is)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _kind(address.ipv4_mapped)
    if address in _METADATA:
        return "a cloud metadata address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "an unspecified address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_private or address.is_reserved or not address.is_global:
        return "a private or reserved address"
    return None


def refused_address(host: str, addresses: Iterable[IPAddress], allow: AllowList) -> str | None:
    """Why a webhook to ``host`` resolving to ``addresses`` is refused (None: it may go).
    Refused when any address is not public, unless the allow-list names the host or
    covers that address."""
    if allow.names(host):
        return None
    for address in addresses:
        why = _kind(address)
        if why is not None and not allow.covers(address):
            return f"the target resolves to {why}"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_webhook_url(url: str, allow: AllowList) -> tuple[str, str, int]:
    """``url``'s scheme, host and port, or :class:`TargetRefused` naming the problem:
    http(s) only, a host, no user or password, and not a literal non-public address (nor
    ``localhost``) unless allowed. Names are resolved at send time."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("must be an http(s) URL")
    host = parts.hostname or ""
    if not host:
        raise TargetRefused("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("the URL must not carry a user or password (secrets go in secret_env)")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise TargetRefused("the URL contains spaces or control characters")
    literal = _literal(host)
    if host.rstrip(".").endswith("localhost") and not allow.names(host):
        raise TargetRefused("the target is a loopback address")
    if literal is not None:
        why = refused_address(host, [literal], allow)
        if why is not None:
            raise TargetRefused(why)
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)
