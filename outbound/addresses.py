"""Which addresses the platform may send a request to (judge endpoints, webhook receivers).

A request made on a staff member's say-so must not reach what only the platform's own machines
can reach: the database, Redis, a cloud's metadata service, a model server on the internal
network. So a host is resolved once, every address it resolves to is checked, and the
connection goes to an address that was checked (outbound.http): a name that resolves to a
public address now and to 127.0.0.1 a moment later gains nothing.

Refused: loopback, private (RFC 1918, unique local), link-local, shared address space (CGNAT,
100.64.0.0/10), multicast, reserved, unspecified and every other address that is not globally
routable, and the cloud metadata services by address and by name; IPv6 addresses that carry an
IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64) are judged by that IPv4
address as well. A host written as a number the way inet_aton reads it (2130706433,
0x7f000001, 0177.0.0.1, 127.1) is that address, never a name sent to DNS.

`MARGINALIA_OUTBOUND_ALLOW` lists the exceptions (host names, addresses, networks), e.g. a model
server on the local network; the metadata services stay refused whatever it says.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance metadata services: AWS (IPv4, IPv6, ECS task credentials), GCP, Azure (IMDS and the
# wireserver), Alibaba, Oracle, OpenStack. Refused even when an allow-list entry covers them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
    )
)
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")
NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# What MARGINALIA_WEBHOOKS_ALLOW_PRIVATE adds for webhooks: loopback and private networks, never
# link-local (where the metadata services live), multicast or unspecified addresses.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "127.0.0.0/8",
        "::1/128",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "fc00::/7",
        "100.64.0.0/10",
    )
)
# A host made of numbers and dots (or 0x... parts) is an address to inet_aton: read it as one.
NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*$", re.IGNORECASE)
HOST_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


class OutboundRefused(Exception):
    """A request that must not be made: the one-line reason says which host and why."""


class UnresolvableHost(OSError):
    """The host has no address (yet): a network failure, not a refusal, so callers may retry."""


def ipv4_from_number(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address inet_aton reads in `host` (1 to 4 parts, each decimal, 0-octal or
    0x-hex, the last filling the remaining bytes), or None when `host` is not such a number.
    Raises OutboundRefused for a number that is no address (999.1.1.1), which DNS must not see."""
    if not NUMERIC_HOST.match(host):
        return None
    parts = host.split(".")
    if len(parts) > 4:
        raise OutboundRefused(f"{host} is neither a host name nor an IPv4 address")
    numbers = []
    for part in parts:
        lower = part.lower()
        if lower.startswith("0x"):
            numbers.append(int(lower[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                raise OutboundRefused(f"{host} is neither a host name nor an IPv4 address")
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *leading, last = numbers
    if any(number > 255 for number in leading) or last >= 256 ** (4 - len(leading)):
        raise OutboundRefused(f"{host} is neither a host name nor an IPv4 address")
    value = last
    for position, number in enumerate(leading):
        value += number << (8 * (3 - position))
    return ipaddress.IPv4Address(value)


def address_literal(host: str) -> IPAddress | None:
    """The address `host` spells (IPv6 with or without brackets and zone, any inet_aton form of
    IPv4), or None for a name."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        try:
            return ipaddress.IPv6Address(bare.split("%")[0])
        except ValueError:
            raise OutboundRefused(f"{host} is not a valid IPv6 address") from None
    return ipv4_from_number(bare[:-1] if bare.endswith(".") else bare)


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, 6to4, Teredo, NAT64)."""
    if address.version == 4:
        return []
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in IPV4_COMPATIBLE and int(address) > 1:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if any(address in prefix for prefix in NAT64_PREFIXES):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [ip for ip in found if ip is not None]


def address_kind(address: IPAddress) -> str | None:
    """What kind of non-public address this is ("loopback", "cloud metadata", ...), or None for
    a public one. An IPv6 address carrying an IPv4 address is as bad as the worse of the two."""
    for carried in embedded_ipv4(address):
        kind = address_kind(carried)
        if kind:
            return f"{kind} (IPv4 {carried} inside IPv6)"
    checks = (
        (address in METADATA_ADDRESSES, "cloud metadata"),
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.version == 4 and address in SHARED_ADDRESS_SPACE, "shared (CGNAT)"),
        (address.is_reserved, "reserved"),
        (address.is_private, "private"),
        (not address.is_global, "non-global"),
    )
    return next((kind for refused, kind in checks if refused), None)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to for TCP (a literal address is itself, without DNS)."""
    literal = address_literal(host)
    if literal is not None:
        return [literal]
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnresolvableHost(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}") from None
    addresses = []
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def parse_allow_list(entries: Iterable[str]) -> tuple[tuple[IPNetwork, ...], frozenset[str]]:
    """(networks, host names) from MARGINALIA_OUTBOUND_ALLOW's entries: an address, a network in
    CIDR notation, or a host name; anything else stops the process at start."""
    networks, hosts = [], set()
    for entry in entries:
        text = entry.strip().lower()
        try:
            networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not HOST_NAME.match(text.rstrip(".")):
            raise ImproperlyConfigured(
                f"MARGINALIA_OUTBOUND_ALLOW: {entry!r} is neither a host name, an address nor a network"
            )
        hosts.add(text.rstrip("."))
    return tuple(networks), frozenset(hosts)


@dataclass(frozen=True)
class Policy:
    """Where requests may go: public addresses, plus the allowed networks and host names (never
    a metadata service). `resolver` is how host names become addresses (DNS by default)."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    resolver: Callable[[str, int], list[IPAddress]] = field(default=resolve, compare=False)

    @classmethod
    def from_settings(cls, *, private_networks: bool = False) -> Policy:
        """The policy of MARGINALIA_OUTBOUND_ALLOW; `private_networks` adds loopback and the
        private networks (MARGINALIA_WEBHOOKS_ALLOW_PRIVATE, for webhooks)."""
        networks, hosts = parse_allow_list(settings.MARGINALIA_OUTBOUND_ALLOW)
        return cls(networks + (PRIVATE_NETWORKS if private_networks else ()), hosts)

    def allows(self, host: str, address: IPAddress) -> bool:
        if address in METADATA_ADDRESSES or any(ip in METADATA_ADDRESSES for ip in embedded_ipv4(address)):
            return False
        if host in self.hosts:
            return True
        candidates = [address, *embedded_ipv4(address)]
        return any(ip in network for ip in candidates for network in self.networks if ip.version == network.version)

    def addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses to connect to for `host`: all of them checked, or OutboundRefused
        naming the first refused one (UnresolvableHost when there are none)."""
        name = host.strip("[]").rstrip(".").lower()
        if name in METADATA_HOSTS:
            raise OutboundRefused(f"{host} is a cloud metadata service; requests there are refused")
        addresses = self.resolver(name, port)
        if not addresses:
            raise UnresolvableHost(f"cannot resolve {host}: no address")
        for address in addresses:
            kind = address_kind(address)
            if kind and not self.allows(name, address):
                shown = host if str(address) == name else f"{host} resolves to {address}, which"
                article = "an" if kind[0] in "aeiou" else "a"
                raise OutboundRefused(
                    f"{shown} is {article} {kind} address: requests go only to public addresses"
                    " and to those listed in MARGINALIA_OUTBOUND_ALLOW"
                )
        return addresses
