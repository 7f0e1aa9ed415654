"""Fixtures for the webhook tests: real receiver processes (receiver_process.py) on 127.0.0.1,
and the settings that let webhooks reach them."""

import pytest

from tests.integrations.receiver_process import Receiver


@pytest.fixture
def allow_local(settings):
    """The test's receiver listens on 127.0.0.1: allowed for webhooks, explicitly and nowhere
    else (the setting kept from before the outbound allow-list, which stays empty), with no
    backoff so that each batch tries again at once."""
    settings.MARGINALIA_OUTBOUND_ALLOW = []
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    settings.MARGINALIA_WEBHOOK_BACKOFF_SECONDS = 0
    settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS = 5


@pytest.fixture
def receiver(tmp_path):
    """A factory: receiver(secret, fail_first=N) starts one that verifies signatures with
    `secret` and answers 500 to its first N requests; all stop at the end."""
    started = []

    def start(secret: str, *, fail_first: int = 0) -> Receiver:
        started.append(Receiver(tmp_path, secret, fail_first=fail_first).start())
        return started[-1]

    yield start
    for process in started:
        process.stop()
