"""The dashboard's upload form in Chromium, with and without JavaScript: it shows only the
options of the chosen kind (CSS alone does it), a refusal reads as a sentence rather than
`field 'file': ...`, keeps the kind and options as sent and asks for the file again by name; and
a BEIR collection's page shows neither "Documents 0" nor a path of the server."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import WAIT_MS, sign_in
from tests.factories import make_collection, make_text_passages, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OPTION_FIELDS = tuple(f"#upload-{name}" for name in ("name", "title", "author", "split", "collection", "study"))
SHOWN = {
    "book": {"#upload-name", "#upload-title", "#upload-author"},
    "relic": {"#upload-name", "#upload-split"},
    "beir": {"#upload-name"},
    "qrels": {"#upload-collection"},
    "judgments": {"#upload-study"},
    "trec_run": {"#upload-name", "#upload-collection"},
    "answers": {"#upload-name", "#upload-collection"},
}


@pytest.fixture(params=[True, False], ids=["with-js", "without-js"])
def staff_tab(request, browser, live_server):
    make_user("curator", staff=True)
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1200, "height": 900}, java_script_enabled=request.param
    )
    context.set_default_timeout(WAIT_MS)
    tab = context.new_page()
    sign_in(tab, "curator")
    yield tab
    context.close()


def test_the_form_shows_only_the_chosen_kinds_options(staff_tab):
    staff_tab.goto("/dashboard/#upload")
    for kind, shown in SHOWN.items():
        staff_tab.select_option("#upload-kind", kind)
        for field in OPTION_FIELDS:
            if field in shown:
                expect(staff_tab.locator(field)).to_be_visible()
            else:
                expect(staff_tab.locator(field)).to_be_hidden()
        help_items = staff_tab.locator("ul.upload-kinds li:visible")
        expect(help_items).to_have_count(1)
    staff_tab.select_option("#upload-kind", "trec_run")
    expect(staff_tab.locator("label[for=upload-name]")).to_have_text("Run name", use_inner_text=True)


def test_a_refused_upload_reads_as_a_sentence_and_asks_for_the_file_again(staff_tab, tmp_path):
    archive = tmp_path / "tiny-beir.zip"
    archive.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the name ending is what is refused
    staff_tab.goto("/dashboard/#upload")
    staff_tab.select_option("#upload-kind", "book")
    staff_tab.fill("#upload-title", "A Tale")
    staff_tab.set_input_files("#upload-file", str(archive))
    staff_tab.click("form.upload-form button[type=submit]")
    error = staff_tab.locator(".upload-error")
    expect(error).to_have_text("File: tiny-beir.zip: a Book (.txt) upload ends in .txt.")
    assert "field '" not in error.inner_text()
    expect(staff_tab.locator("#upload-file-again")).to_contain_text("Choose “tiny-beir.zip” again")
    expect(staff_tab.locator("#upload-kind")).to_have_value("book")
    expect(staff_tab.locator("#upload-title")).to_have_value("A Tale")
    expect(staff_tab.locator("#upload-title")).to_be_visible()
    expect(staff_tab.locator("#upload-split")).to_be_hidden()


def test_a_beir_collection_shows_its_passages_as_documents_and_no_server_path(staff_tab):
    collection = make_collection("scifact-mini")
    collection.source = "/srv/marginalia/data/uploads/4f2a9c/unpacked/scifact-mini"
    collection.save(update_fields=["source"])
    make_text_passages(collection, ["First abstract of the corpus.", "Second abstract of the corpus."])
    staff_tab.goto(f"/collections/{collection.pk}/")
    facts = staff_tab.locator("dl.facts")
    expect(facts.locator("dd.documents")).to_contain_text("2")
    expect(facts.locator("dd.source")).to_have_text("scifact-mini")
    assert "/srv/" not in staff_tab.content() and "uploads/" not in staff_tab.content()
    staff_tab.goto("/dashboard/")
    row = staff_tab.locator(f'tr[data-collection="{collection.pk}"]')
    expect(row.locator("td").nth(2)).to_have_text("as passages")
