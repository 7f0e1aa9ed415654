"""The token endpoint's rate (MARGINALIA_TOKEN_RATE, 30/min per address) is counted once for all
web processes: each process kept its own count in a LocMemCache, so two gunicorn workers let
through 50 of a documented 30/min. Counted in Redis (marginalia/throttling.py), exactly 30 of 40
concurrent requests to two gunicorn workers pass. Redis not answering never fails a request:
each process then counts alone, so the limit is looser but still there."""

import concurrent.futures
import os
import signal
import time

import pytest
import redis
import requests

from jobs.management.commands.run_platform import free_port, start_redis, stop_process
from marginalia.throttling import SharedScopedRateThrottle
from tests.factories import api_client, make_user
from tests.live_platform import manage, start_gunicorn

PASSWORD = "pw-for-tests"
RATE = 30


@pytest.fixture
def rates(settings):
    """An empty count: the test's own Redis database for rates."""
    client = redis.Redis.from_url(settings.MARGINALIA_RATE_LIMIT_URL)
    client.flushdb()
    yield client
    client.close()


def ask_for_token(client, address="10.3.3.3"):
    return client.post("/api/auth/token/", {"username": "scripted", "password": PASSWORD}, REMOTE_ADDR=address)


@pytest.mark.django_db
def test_the_thirty_first_request_in_a_minute_is_refused_with_retry_after(rates):
    make_user("scripted", staff=True)
    client = api_client()

    answers = [ask_for_token(client).status_code for _ in range(RATE + 1)]

    assert answers == [200] * RATE + [429]
    refused = ask_for_token(client)
    assert refused.status_code == 429 and 55 <= int(refused["Retry-After"]) <= 60
    assert ask_for_token(client, address="10.3.3.4").status_code == 200  # another address has its own count
    assert list(rates.scan_iter("marginalia:rate:*"))


@pytest.mark.django_db
def test_with_redis_unreachable_each_process_still_counts_and_nothing_fails(settings, rates):
    settings.MARGINALIA_RATE_LIMIT_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    make_user("scripted", staff=True)
    client = api_client()

    answers = [ask_for_token(client, address="10.3.3.5").status_code for _ in range(RATE + 1)]

    assert answers == [200] * RATE + [429]


@pytest.mark.django_db
def test_with_redis_frozen_a_request_waits_half_a_second_at_most_for_it(settings, rates):
    process, url = start_redis(free_port())
    os.kill(process.pid, signal.SIGSTOP)
    try:
        settings.MARGINALIA_RATE_LIMIT_URL = url
        make_user("scripted", staff=True)
        started = time.monotonic()
        response = ask_for_token(api_client(), address="10.3.3.6")
        assert response.status_code == 200 and time.monotonic() - started < 5
    finally:
        os.kill(process.pid, signal.SIGCONT)
        stop_process(process)


@pytest.fixture(scope="module")
def gunicorn(platform):
    """The web server as run_platform --server gunicorn runs it, with two worker processes."""
    manage(platform, "shell", "-c", "from tests.factories import make_user; make_user('scripted', staff=True)")
    url = f"http://127.0.0.1:{free_port()}"
    # Per hour: on a loaded machine 40 requests (each hashing a password) may take over a minute.
    env = {**platform["env"], "MARGINALIA_TOKEN_RATE": f"{RATE}/hour"}
    process = start_gunicorn(env, platform["folder"] / "gunicorn.log", url)
    yield url
    stop_process(process)


@pytest.mark.redis
def test_two_gunicorn_workers_let_through_exactly_the_rate_of_concurrent_requests(gunicorn):
    def ask(_):
        return requests.post(
            f"{gunicorn}/api/auth/token/", json={"username": "scripted", "password": PASSWORD}
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(ask, range(RATE + 10)))

    assert answers.count(200) == RATE and answers.count(429) == 10, answers


@pytest.mark.django_db
def test_retry_after_never_exceeds_the_window_when_a_later_request_took_the_slot_first(monkeypatch, rates):
    """Concurrent requests read the clock before they reach Redis: the one that read it later can
    take the last slot first. The refused one then saw an oldest entry newer than its own `now`,
    and its Retry-After (ceil of oldest + window - now) read 2 for a 1/s rate."""
    monkeypatch.setattr(SharedScopedRateThrottle, "THROTTLE_RATES", {"token": "1/s"})
    make_user("scripted", staff=True)
    address = "10.3.3.7"
    rates.zadd(f"marginalia:rate:throttle_token_{address}", {"later-request": time.time() + 0.5})

    refused = ask_for_token(api_client(), address=address)

    assert refused.status_code == 429 and refused["Retry-After"] == "1"
