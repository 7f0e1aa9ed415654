"""Real-browser tests: Debian's Chromium driven by Playwright's sync API against pytest-django's
live server. Never downloads a browser; without /usr/bin/chromium the tests skip locally and
fail in CI (tests.conftest.require)."""

import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.conftest import require

# Playwright's sync API runs an event loop in the test thread; Django refuses ORM calls from a
# thread with a running loop unless told that this is deliberate.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Generous: the machine running the suite may be busy; waits end as soon as the page is ready.
WAIT_MS = 20_000
PASSWORD = "pw-for-tests"


@pytest.fixture(scope="session")
def browser():
    require(CHROMIUM.exists(), f"Chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    yield tab
    context.close()


@contextmanager
def signed_in_tab(browser, base_url: str, username: str, password: str = PASSWORD):
    """A tab of its own browser context on `base_url` (a platform started by the test rather than
    the live server), signed in through the login form."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    try:
        sign_in(tab, username, password)
        yield tab
    finally:
        context.close()


def sign_in(page, username: str, password: str = PASSWORD) -> None:
    """Through the real login form; lands on the home page."""
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: urlparse(url).path == "/")
