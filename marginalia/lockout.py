"""Sign-in throttling that slows an attacker without locking the owner out.

django-axes counted failures per account and per address, so anyone could lock an account from
anywhere with five wrong passwords (an account-wide denial of service). Now:
- an account-and-address pair is locked after MARGINALIA_LOGIN_FAILURE_LIMIT failures, for
  MARGINALIA_LOGIN_COOLOFF_MINUTES (axes' own lock, AXES_LOCKOUT_PARAMETERS);
- past the limit, failures of one account from all addresses, and of one address on all
  accounts, impose a wait after the last of them that doubles with each further failure
  (MARGINALIA_LOGIN_DELAY_SECONDS x 2^(failures - limit), at most the cool-off): a guesser
  spread over many addresses, or one address trying many accounts, gets one try per wait;
- the account-wide wait does not apply from an address the account has signed in from before
  (axes' access log): the owner at home is not slowed by strangers' guesses.
Every web process reads the same rows (the database), and a refused attempt is not counted, so
hammering during a wait does not lengthen it."""

from __future__ import annotations

import math
from datetime import timedelta

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.db.models import Max, QuerySet, Sum
from django.utils import timezone


class ProgressiveLockoutHandler(AxesDatabaseHandler):
    def is_locked(self, request, credentials: dict | None = None) -> bool:
        """Locked: the pair's own lock, or a wait that has not passed. The seconds left are kept
        on the request (`login_wait_seconds`) for the "too many attempts" page."""
        wait = self._pair_wait(request, credentials) if super().is_locked(request, credentials) else None
        wait = wait or self.progressive_wait(request, credentials)
        if wait > timedelta(0):
            request.login_wait_seconds = math.ceil(wait.total_seconds())
            return True
        return False

    def _pair_wait(self, request, credentials) -> timedelta:
        username = get_client_username(request, credentials)
        last = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address).aggregate(
            last=Max("attempt_time")
        )["last"]
        return max(timedelta(0), last + get_cool_off(request) - timezone.now()) if last else get_cool_off(request)

    def progressive_wait(self, request, credentials: dict | None = None) -> timedelta:
        """How long this request must still wait because of failures of its account from every
        address (unless it comes from an address the account signed in from) or of its address
        on every account."""
        recent = AccessAttempt.objects.filter(attempt_time__gte=get_cool_off_threshold(request))
        username, address = get_client_username(request, credentials), request.axes_ip_address
        limit = get_failure_limit(request, credentials)
        waits = [timedelta(0)]
        if username and not AccessLog.objects.filter(username=username, ip_address=address).exists():
            waits.append(self._wait(recent.filter(username=username), limit, request))
        if address:
            waits.append(self._wait(recent.filter(ip_address=address), limit, request))
        return max(waits)

    @staticmethod
    def _wait(attempts: QuerySet, limit: int, request) -> timedelta:
        counted = attempts.aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
        excess = (counted["failures"] or 0) - limit
        if excess < 0:
            return timedelta(0)
        doubled = timedelta(seconds=settings.MARGINALIA_LOGIN_DELAY_SECONDS * 2 ** min(excess, 32))
        delay = min(doubled, get_cool_off(request))
        return counted["last"] + delay - timezone.now()
