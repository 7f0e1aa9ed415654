"""API documentation in the browser, served from the project (no CDN), and a browsable /api/
root that maps the API; both for signed-in users only."""

import re

import pytest
from django.contrib.staticfiles import finders

from tests.factories import api_client, make_annotator
from tests.routes import routes

pytestmark = pytest.mark.django_db


def test_the_api_documentation_loads_everything_from_our_static_files(staff_client):
    response = staff_client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(not source.startswith(("http:", "https:", "//")) for source in sources), sources
    scripts = [source for source in sources if source.endswith(".js")]
    assert scripts and all(source.startswith("/static/drf_spectacular_sidecar/") for source in scripts)
    for source in scripts:
        assert finders.find(source.removeprefix("/static/")), source
    assert "/api/schema/" in html


def test_the_api_root_maps_the_api_and_is_browsable(staff_client):
    root = staff_client.get("/api/", HTTP_ACCEPT="application/json").json()
    assert root["retrieval (staff)"]["uploads"] == "http://testserver/api/uploads/"
    assert root["documentation"]["swagger-ui"] == "http://testserver/api/docs/"
    for links in root.values():
        for url in links.values():
            # every link is a live endpoint: judgments answer 400 until told which study, POST-only
            # actions 405 to a GET, judge secrets 403 to staff without the endpoint permission
            response = staff_client.get(url.removeprefix("http://testserver"))
            assert response.status_code in (200, 400, 403, 405), url
    page = staff_client.get("/api/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert "Api Root" in page.content.decode() and "every endpoint" in page.content.decode()


def test_every_api_route_without_an_id_is_on_the_root_so_a_new_resource_cannot_be_forgotten(staff_client):
    """Judges, webhooks and invitations were missing from /api/ once: the map is checked against
    the URL configuration, not against a list kept by hand."""
    resources = {
        "/" + re.sub(r"[\\^$]", "", template)
        for _, template in routes()
        if template.startswith("api/") and "<" not in template and "(?P" not in template
    } - {"/api/"}
    root = staff_client.get("/api/", HTTP_ACCEPT="application/json").json()
    mapped = {url.removeprefix("http://testserver") for links in root.values() for url in links.values()}
    assert resources - mapped == set()
    assert {"/api/judges/", "/api/webhooks/", "/api/invitations/", "/api/judge-secrets/"} <= mapped


def test_the_dashboard_links_the_documentation_and_the_root(staff_client):
    html = staff_client.get("/dashboard/").content.decode()
    assert 'href="/api/docs/"' in html and 'href="/api/"' in html


@pytest.mark.parametrize("url", ["/api/", "/api/docs/"])
def test_visitors_must_sign_in_and_annotators_see_no_data(client, url):
    assert client.get(url).status_code in (302, 401, 403)
    annotator = api_client(make_annotator())
    assert annotator.get(url).status_code == 200
    assert annotator.get("/api/collections/").status_code == 403


def test_the_schema_describes_the_upload_endpoint(staff_client):
    schema = staff_client.get("/api/schema/", {"format": "json"}).json()
    upload = schema["paths"]["/api/uploads/"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert "202" in upload["responses"]
    # The file is a binary part, so that generated clients send bytes (not a URI string).
    form = upload["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = schema["components"]["schemas"][form]
    assert fields["properties"]["file"] == {"type": "string", "format": "binary"}
    assert {"kind", "file"} <= set(fields["required"])
    run_import = schema["paths"]["/api/runs/import/"]["post"]["requestBody"]["content"]["multipart/form-data"]
    run_form = schema["components"]["schemas"][run_import["schema"]["$ref"].rsplit("/", 1)[-1]]
    assert run_form["properties"]["file"]["format"] == "binary"
