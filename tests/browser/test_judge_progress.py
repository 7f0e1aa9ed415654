"""A judge at work, watched from the study page in a real Chromium against the real platform (a
web server process, Redis, a worker on every queue, tests/live_platform.py) and a real
OpenAI-compatible endpoint that takes a second per answer: staff start the judge from the
study's panel, the panel counts its answers one by one while the worker asks them (progress used
to jump a batch at a time, and the study page showed nothing while a judge ran), and when the
job ends the panel shows the judge's results without a reload."""

import json

import pytest
from playwright.sync_api import expect

from jobs.management.commands.run_platform import stop_process
from tests.browser.conftest import PASSWORD, signed_in_tab
from tests.judges.conftest import LOCAL_MODEL_SERVER, start_chat_server
from tests.live_platform import WAIT_SECONDS, manage, worker_log

pytestmark = [pytest.mark.browser, pytest.mark.redis]

ITEMS = 6
# Record every text the judging job's message shows, as the page changes it.
RECORD_MESSAGES = """
window.seenMessages = [];
new MutationObserver(function () {
  document.querySelectorAll(".judging .job-message").forEach(function (node) {
    const last = window.seenMessages[window.seenMessages.length - 1];
    if (node.textContent !== last) window.seenMessages.push(node.textContent);
  });
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="module")
def platform(platform):
    """The shared platform, allowed to reach the test's model server on 127.0.0.1."""
    platform["env"]["MARGINALIA_OUTBOUND_ALLOW"] = ",".join(LOCAL_MODEL_SERVER)
    return platform


@pytest.fixture(scope="module")
def slow_endpoint(platform):
    server = start_chat_server(platform["folder"], "--answer", "SCORE: 1", "--delay", "1.0")
    yield server
    stop_process(server.process)


@pytest.fixture(scope="module")
def study_id(platform, slow_endpoint) -> int:
    created = manage(
        platform,
        "shell",
        "-c",
        "import json\n"
        "from django.contrib.auth.models import User\n"
        "from tests.factories import make_label_study\n"
        f"User.objects.create_user('curator', password='{PASSWORD}', is_staff=True)\n"
        f"print(json.dumps(make_label_study(items={ITEMS}, name='judged by a slow model').pk))",
    )
    settings = {"base_url": slow_endpoint.base_url, "model": "served", "batch_size": 8, "concurrency": 1}
    manage(platform, "register_judge", "slow-llm", "--backend", "openai", "--config", json.dumps(settings))
    return json.loads(created.strip().splitlines()[-1])


@pytest.fixture
def staff_page(browser, web_server):
    with signed_in_tab(browser, web_server, "curator") as tab:
        yield tab


def test_the_study_page_counts_a_running_judges_answers_one_by_one(staff_page, study_id, platform):
    staff_page.goto(f"/studies/{study_id}/")
    panel = staff_page.locator("#judges")
    panel.get_by_label("Judge").select_option("slow-llm")
    panel.get_by_role("button", name="Start judging").click()

    expect(staff_page.locator("ul.messages")).to_contain_text("Judging of “judged by a slow model” by slow-llm v1")
    working = staff_page.locator("#judges .judging li")
    expect(working).to_contain_text("slow-llm v1")
    staff_page.evaluate(RECORD_MESSAGES)

    results = staff_page.locator("#judges table tbody tr", has_text="slow-llm")
    expect(results.locator("td").nth(5)).to_have_text(str(ITEMS), timeout=WAIT_SECONDS * 1000)
    expect(staff_page.locator("#judges .judging")).to_have_count(0)  # the panel was fetched again

    seen = staff_page.evaluate("window.seenMessages")
    counts = [int(message.split("/")[0]) for message in seen if message.endswith("answers from slow-llm v1")]
    assert len([count for count in counts if 0 < count < ITEMS]) >= 2, (seen, worker_log(platform))
    assert counts == sorted(counts), seen  # one by one, never back
