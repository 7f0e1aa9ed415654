"""Uploads in a real Chromium against the real platform: a web server process (runserver on the
platform's SQLite file), Redis and a Celery worker. Staff upload a BEIR zip from the dashboard
and watch its job finish; a broken file shows its one-line error in the job row, and a wrong
file is refused at once above the form, with nothing written."""

import sqlite3
import subprocess
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from jobs.management.commands.run_platform import free_port, stop_process
from tests.browser.conftest import PASSWORD, signed_in_tab
from tests.console.upload_files import CORPUS, beir_folder, zip_folder
from tests.live_platform import MANAGE, PROJECT_ROOT, WAIT_SECONDS, manage, worker_log

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def web(platform, worker):
    """The web server, as run_platform starts it in development, on the platform's database."""
    manage(
        platform,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_user('curator', password='{PASSWORD}', is_staff=True)",
    )
    process, url = start_web(platform)
    yield url
    stop_process(process)


def start_web(platform, attempts: int = 5):
    """runserver on a free port; another port when the chosen one was taken meanwhile (the
    machine is shared)."""
    log_path = platform["folder"] / "web.log"
    for _ in range(attempts):
        port = free_port()
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [*MANAGE, "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure"],
                env=platform["env"],
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + WAIT_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/accounts/login/", timeout=2)
                return process, url
            except OSError:
                time.sleep(0.3)
        stop_process(process)
        if "already in use" not in log_path.read_text():
            break
    raise RuntimeError(log_path.read_text()[-2000:])


@pytest.fixture
def staff_page(browser, web):
    with signed_in_tab(browser, web, "curator") as tab:
        yield tab


def collections(platform) -> list[str]:
    with sqlite3.connect(platform["database"]) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM retrieval_collection ORDER BY name")]


def upload(page, kind: str, path) -> None:
    page.goto("/dashboard/")
    page.select_option("#upload-kind", kind)
    page.set_input_files("#upload-file", str(path))
    with page.expect_navigation():
        page.get_by_role("button", name="Upload").click()


def test_staff_upload_a_beir_zip_and_watch_the_job_finish(staff_page, platform, tmp_path):
    archive = zip_folder(beir_folder(tmp_path), tmp_path / "tiny-beir.zip")
    upload(staff_page, "beir", archive)

    expect(staff_page.locator("ul.messages")).to_contain_text("“tiny-beir.zip” uploaded; its import queued as job")
    row = staff_page.locator("tr.job", has_text="tiny-beir.zip")
    expect(row.locator(".job-status")).to_have_text("succeeded", timeout=WAIT_SECONDS * 1000)
    expect(row.locator(".progress")).to_have_attribute("aria-valuenow", "100")
    assert "tiny-beir" in collections(platform), worker_log(platform)

    # The collections list is fetched again when the job ends: no reload needed.
    collection_row = staff_page.locator("#collections tr", has_text="tiny-beir")
    expect(collection_row.locator("td").nth(3)).to_have_text(str(len(CORPUS)))


def test_a_bad_upload_shows_its_one_line_error(staff_page, platform, tmp_path):
    broken = zip_folder(beir_folder(tmp_path, corpus=[*CORPUS, "not json"]), tmp_path / "broken-beir.zip")
    upload(staff_page, "beir", broken)

    row = staff_page.locator("tr.job", has_text="broken-beir.zip")
    expect(row.locator(".job-status")).to_have_text("failed", timeout=WAIT_SECONDS * 1000)
    expect(row.locator(".job-message")).to_have_text(
        "InputError: broken-beir.zip/tiny-beir/corpus.jsonl:4: expected a JSON object, got string"
    )
    assert "broken-beir" not in collections(platform)

    upload(staff_page, "book", broken)  # a zip is no book: refused before any job
    expect(staff_page.locator(".upload-error")).to_have_text(  # the page's words, not the command line's
        "File: broken-beir.zip: a Book (.txt) upload ends in .txt."
    )
