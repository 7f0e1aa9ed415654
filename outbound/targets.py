"""One strict reading of the URLs the platform sends requests to (judge endpoints, webhooks).

Parsers disagree on odd URLs: `http://127.0.0.1:8314\\@example.org/` is a request to
example.org for one (userinfo "127.0.0.1:8314\\") and to 127.0.0.1 for another (a backslash read
as a slash). So anything a parser could read two ways is refused with a one-line reason, and
what passes is normalised (lower-case scheme and host, IDNA host, no default port, "/" for an
empty path), so the URL that is checked, stored and requested is one and the same.

Refused: other schemes than http(s); spaces, control characters and backslashes anywhere;
userinfo (`user:pass@`); fragments; ports that are not 1-65535 in ASCII digits; hosts that are
neither a DNS name (labels of letters, digits and inner hyphens; international names through
IDNA 2008 / UTS 46) nor an address written plainly (dotted-quad IPv4 without leading zeros,
bracketed IPv6 without a zone); numbers spelt another way (2130706433, 0x7f.1, 0177.0.0.1);
characters outside RFC 3986 in the path and query, and broken %-escapes.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import idna

from .addresses import HOST_NAME

SCHEMES = {"http": 80, "https": 443}
MAX_LENGTH = 2000
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# RFC 3986 pchar plus "/" and "?", with %-escapes checked separately.
PATH_AND_QUERY = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*$")
BROKEN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
DIGITS = re.compile(r"^[0-9]{1,5}$")
NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)


class BadURL(ValueError):
    """The URL is refused; the message is one line saying why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # ASCII, lower case; an IPv6 address without brackets
    port: int
    path: str  # path and query, starting with "/"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == SCHEMES[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{host}{port}{self.path}"


def parse_url(text: object, *, max_length: int = MAX_LENGTH) -> Target:
    """The URL's one reading, normalised, or BadURL saying what is odd about it."""
    if not isinstance(text, str):
        raise BadURL("must be a URL as text")
    if len(text) > max_length:
        raise BadURL(f"must be at most {max_length} characters")
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in text):
        raise BadURL("must not contain spaces or control characters")
    if "\\" in text:
        raise BadURL("must not contain a backslash")
    scheme = SCHEME.match(text)
    if not scheme or scheme.group(1).lower() not in SCHEMES or not text[scheme.end() :].startswith("//"):
        raise BadURL("must be an http:// or https:// URL")
    rest = text[scheme.end() + 2 :]
    cut = min((rest.find(mark) for mark in "/?#" if mark in rest), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "@" in authority:
        raise BadURL("must not carry a user name or password (user:password@)")
    if "#" in path:
        raise BadURL("must not have a fragment (#...)")
    host, port = _host_and_port(authority, SCHEMES[scheme.group(1).lower()])
    if not PATH_AND_QUERY.match(path):
        raise BadURL("path and query may hold only RFC 3986 characters (percent-encode the others)")
    if BROKEN_ESCAPE.search(path):
        raise BadURL("has a % that is not followed by two hexadecimal digits")
    if not path.startswith("/"):
        path = "/" + path
    return Target(scheme.group(1).lower(), host, port, path)


def _host_and_port(authority: str, default_port: int) -> tuple[str, int]:
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise BadURL("has an unclosed [ in its host")
        host, after = _ipv6(authority[1:close]), authority[close + 1 :]
        if after and not after.startswith(":"):
            raise BadURL("has characters after the bracketed address")
        return host, _port(after[1:], default_port) if after else default_port
    if authority.count(":") > 1:
        raise BadURL("IPv6 addresses must be written in brackets")
    name, colon, port = authority.partition(":")
    return _host(name), _port(port, default_port) if colon else default_port


def _port(text: str, default_port: int) -> int:
    if not DIGITS.match(text) or not 1 <= int(text) <= 65535:
        raise BadURL(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


def _ipv6(text: str) -> str:
    if "%" in text:
        raise BadURL("IPv6 zone identifiers (%...) are not allowed")
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise BadURL(f"[{text}] is not a valid IPv6 address") from None


def _host(name: str) -> str:
    if not name:
        raise BadURL("has no host")
    if "%" in name:
        raise BadURL("must not %-encode its host")
    if not name.isascii():
        try:
            encoded = idna.encode(name, uts46=True, std3_rules=True).decode("ascii")
            readable = idna.decode(encoded)
        except (idna.IDNAError, UnicodeError) as exc:
            raise BadURL(f"host is not a valid international domain name ({exc})") from None
        if readable != name.lower():
            raise BadURL(f"host {name!a} holds characters IDNA reads as others (it would be {readable!a})")
        name = encoded
    name = name.lower()
    labels = name.split(".")
    if labels[-1] and NUMERIC_LABEL.match(labels[-1]):
        try:
            address = ipaddress.IPv4Address(name)
        except ValueError:
            address = None
        if address is None or str(address) != name:
            raise BadURL(f"host {name} must be written as four decimal numbers (like 192.0.2.1) or be a name")
        return name
    if not HOST_NAME.match(name):
        raise BadURL(f"host {name} is not a valid host name (letters, digits and hyphens between dots)")
    for label in labels:
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError) as exc:
                raise BadURL(f"host label {label} is not valid IDNA ({exc})") from None
    return name
