"""A staff member in a real Chromium: the report shows labels by annotator competence and agreement
per annotator, label and time; they set the study's agreement thresholds with the report's form,
the report and the study page then warn about the annotator below the threshold, and the
warning links back to the agreement tables."""

import pytest

from tests.browser.conftest import sign_in
from tests.factories import add_judgment, make_annotator, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def study():
    """Twelve items; two annotators choose the gold, one always the option after it."""
    make_user("curator", staff=True)
    study = make_relic_proxy_study(12, judgments_per_item=3, name="agreement study")
    people = [make_annotator(name) for name in ("steady_one", "steady_two", "wayward")]
    for item in study.items.all():
        gold = item.candidates.get(is_gold=True).position
        for person, position in zip(people, (gold, gold, (gold + 1) % 3), strict=True):
            add_judgment(item, person, position)
    return study


def test_staff_set_thresholds_on_the_report_and_both_pages_warn(page, study):
    sign_in(page, "curator")
    page.goto(f"/studies/{study.pk}/report/")
    competence = page.locator("#competence")
    assert competence.locator("th", has_text="dawid-skene").count() == 1
    assert competence.locator("tr", has_text="wayward").count() == 1
    detail = page.locator("#agreement-detail")
    assert detail.locator("tr", has_text="wayward").count() == 1
    assert detail.get_by_text("Gold position (rows) against the position chosen (columns)").is_visible()
    assert page.locator(".agreement-warning").count() == 0

    form = page.locator("#agreement-watch form")
    form.locator("input[name=study_threshold]").fill("")
    form.locator("input[name=annotator_threshold]").fill("0.1")  # the steady pair: 0.25, wayward: -0.5
    form.locator("input[name=batch_size]").fill("9")
    form.get_by_role("button", name="Save thresholds").click()
    page.wait_for_url(f"**/studies/{study.pk}/report/#agreement-watch")
    page.reload()  # the settings changed the report: computing it again checks them
    warning = page.locator(".agreement-warning")
    assert "wayward" in warning.inner_text() and "steady_one" not in warning.inner_text()
    assert page.locator("#agreement-detail summary", has_text="By batch of 9 judgments (4)").count() == 1
    assert page.locator("svg.agreement-over-time").count() == 1

    page.goto(f"/studies/{study.pk}/")
    warning = page.locator(".agreement-warning")
    assert "wayward" in warning.inner_text()
    warning.get_by_role("link", name="Agreement per annotator, label and time").click()
    page.wait_for_url(f"**/studies/{study.pk}/report/#agreement-detail")
    assert page.locator("#agreement-detail").is_visible()

    form = page.locator("#agreement-watch form")
    form.locator("input[name=annotator_threshold]").fill("7")
    form.get_by_role("button", name="Save thresholds").click()
    assert "Not saved" in page.locator(".messages").inner_text()
