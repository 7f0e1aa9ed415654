"""Request rates counted once for all web processes. DRF's throttles keep their history in
Django's default cache, a LocMemCache per process: with N web processes a "30/min" limit let
through 30 x N (the first 429 came at request 51 of a documented 30/min). Here the count lives in
the platform's Redis (MARGINALIA_RATE_LIMIT_URL, by default REDIS_URL), which every web process
already reaches: a sliding window kept as a sorted set per client and scope, checked and updated
by one Lua script, so concurrent requests in several processes cannot both take the last slot.

Why Redis and not Django's database cache: the database cache has no atomic increment (get, then
set: two processes read 29 and both write 30), and every request would write a row through the
database that carries the judgments. Redis is asked with short timeouts; when it does not
answer, each process falls back to counting alone (DRF's own throttle on its local cache) and
logs it: the limit is then looser, never absent, and the request never fails for it."""

from __future__ import annotations

import logging
import uuid

import redis
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.throttling import ScopedRateThrottle

logger = logging.getLogger(__name__)

# Seconds a rate check may wait for Redis before the process counts alone.
REDIS_TIMEOUT_SECONDS = 0.5

# KEYS[1]: the client's window; ARGV: now, window seconds, allowed requests, a unique member.
# Returns -1 when the request is let through (and counted), else the time of the oldest request
# still in the window (the slot that frees first).
_SLIDING_WINDOW = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
  return -1
end
return redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
"""

_clients: dict[str, redis.Redis] = {}
_fallback_cache = LocMemCache("marginalia-rate-fallback", {})


def _client() -> redis.Redis:
    url = settings.MARGINALIA_RATE_LIMIT_URL
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            retry_on_timeout=False,
        )
    return _clients[url]


class SharedScopedRateThrottle(ScopedRateThrottle):
    """ScopedRateThrottle (the view's `throttle_scope`, DEFAULT_THROTTLE_RATES) counted in Redis
    for every web process; a 429 carries Retry-After as DRF's does."""

    cache = _fallback_cache  # only when Redis does not answer

    def allow_request(self, request, view) -> bool:
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.get_cache_key(request, view)
        if self.rate is None or self.key is None:
            return True
        self.now, self.shared_wait = self.timer(), None
        try:
            oldest = _client().eval(
                _SLIDING_WINDOW,
                1,
                f"marginalia:rate:{self.key}",
                self.now,
                self.duration,
                self.num_requests,
                uuid.uuid4().hex,
            )
        except redis.RedisError as exc:
            logger.warning("rate limit counted by this process alone: Redis did not answer (%s)", exc)
            return super().allow_request(request, view)
        if oldest == -1:
            return True
        self.shared_wait = max(0.0, float(oldest) + self.duration - self.now)
        return False

    def wait(self) -> float | None:
        """Seconds until a slot frees, never more than the window: a concurrent request that read
        the clock after this one may have taken the slot first (in Redis or in DRF's local
        history), leaving an oldest entry newer than this request's `now`."""
        wait = self.shared_wait if self.shared_wait is not None else super().wait()
        return None if wait is None else min(float(self.duration), wait)
