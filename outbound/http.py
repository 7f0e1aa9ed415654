"""The one way the platform sends HTTP requests out: an httpx2 client whose every connection is
opened by `GuardedNetwork`, which resolves the host, checks every address (outbound.addresses)
and connects to an address it checked. Nothing else resolves the name in between, so there is
no window for DNS rebinding; a redirect is not followed (`follow_redirects=False`), and were
one followed its new host would pass through the same check. Proxies from the environment are
ignored (`trust_env=False`): a proxy would make the checked address the proxy's.

The openai client (judges) takes this client as its `http_client`; webhooks post through it.
TLS is unchanged: httpcore2 wraps the checked connection with the URL's host name for SNI and
certificate verification.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import httpcore2
import httpx2

from .addresses import OutboundRefused, Policy, UnresolvableHost

LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20)  # httpx2's defaults


class GuardedNetwork(httpcore2.NetworkBackend):
    """httpcore2's network backend for one policy: `connect_tcp` goes only to checked addresses."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.direct = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable | None = None,
    ) -> httpcore2.NetworkStream:
        try:
            addresses = self.policy.addresses(host, port)
        except UnresolvableHost as exc:
            raise httpcore2.ConnectError(str(exc)) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return self.direct.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        raise OutboundRefused("requests out of the platform never go to a local socket")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx2's own transport with its connection pool on `GuardedNetwork`. httpx2 has no
    argument for a network backend, so the pool it built is replaced by an equal one that has
    (the pool is the transport's only state)."""

    def __init__(self, policy: Policy):
        super().__init__(trust_env=False, limits=LIMITS)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=LIMITS.max_connections,
            max_keepalive_connections=LIMITS.max_keepalive_connections,
            keepalive_expiry=LIMITS.keepalive_expiry,
            network_backend=GuardedNetwork(policy),
        )


def guarded_client(policy: Policy, *, timeout: float) -> httpx2.Client:
    """An httpx2 client that reaches only what `policy` allows and follows no redirect."""
    return httpx2.Client(transport=GuardedTransport(policy), follow_redirects=False, trust_env=False, timeout=timeout)
