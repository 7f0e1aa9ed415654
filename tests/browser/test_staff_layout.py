"""The staff pages in a real Chromium at 1280 px and on a phone: the one navigation is there,
nothing overflows the window sideways, every table's key (first) column is in view, and the
dashboard's Recent runs table is whole without scrolling. A screenshot of each page at 1280 px is
taken (kept in the test's folder) and must not be blank."""

import pytest

from annotation.models import Study
from console.navigation import NAVIGATION
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.browser.conftest import sign_in
from tests.factories import add_judgment, make_annotator, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

# Page geometry measured in the browser: the document's overflow, and for each table whether its
# first column's cells (not a row-wide note) end inside the window and whether it is wider than its box.
LAYOUT = """() => {
  const width = document.documentElement.clientWidth;
  const tables = [...document.querySelectorAll("main table")].map((table) => {
    const keys = [...table.querySelectorAll("tr > :first-child")]
      .filter((cell) => cell.offsetParent !== null && cell.colSpan === 1);
    const box = table.parentElement;
    return {
      id: table.closest("section, details")?.id || table.className,
      keyOutside: keys.some((cell) => cell.getBoundingClientRect().right > width + 1),
      overflows: table.scrollWidth > box.clientWidth + 1,
    };
  });
  return {overflow: document.documentElement.scrollWidth - width, tables,
          nav: [...document.querySelectorAll("nav.site-nav a")].map((a) => a.textContent)};
}"""


@pytest.fixture
def staff_pages():
    """A collection with a finished BM25 run and a proxy study with answers: every staff page
    has rows to lay out."""
    make_user("curator", staff=True)
    study = make_relic_proxy_study(4, name="layout study")
    run = execute_run(create_run(study.collection, get_or_create_retriever("bm25"), depth=10))
    annotator = make_annotator("reader")
    for item in study.items.all()[:2]:
        add_judgment(item, annotator, 0)
    return [
        "/dashboard/",
        f"/runs/{run.pk}/",
        f"/collections/{study.collection_id}/",
        "/studies/",
        f"/studies/{study.pk}/",
        "/studies/new/",
        f"/studies/{study.pk}/quality/",
        f"/studies/{study.pk}/adjudicate/",
        f"/studies/{study.pk}/adjudicate/{study.items.order_by('position').first().pk}/",
        f"/studies/{study.pk}/report/",
    ]


def test_staff_pages_fit_1280_px_and_a_phone_with_the_navigation(page, staff_pages, tmp_path):
    sign_in(page, "curator")
    expected_nav = [entry.label for entry in NAVIGATION]
    for url in staff_pages:
        page.set_viewport_size(DESKTOP)
        page.goto(url)
        layout = page.evaluate(LAYOUT)
        assert layout["nav"] == expected_nav, url
        assert layout["overflow"] <= 0, (url, layout)
        assert not [table for table in layout["tables"] if table["overflows"] or table["keyOutside"]], (url, layout)
        shot = tmp_path / (url.strip("/").replace("/", "-") + ".png")
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000, url

        page.set_viewport_size(PHONE)
        page.goto(url)
        layout = page.evaluate(LAYOUT)
        assert layout["overflow"] <= 0, (url, "phone", layout)
        assert not [table for table in layout["tables"] if table["keyOutside"]], (url, "phone", layout)
    assert Study.objects.count() == 1
