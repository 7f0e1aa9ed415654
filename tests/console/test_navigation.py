"""One navigation on every page (console/navigation.py), what annotators see of it, and the
styled error pages (400, 403, 404, 500)."""

import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from console.navigation import NAVIGATION
from tests.factories import make_annotator, make_proxy_study

pytestmark = pytest.mark.django_db

STAFF_LINKS = [entry.label for entry in NAVIGATION]


def nav_links(html: str) -> list[str]:
    nav = re.search(r'<nav class="site-nav".*?</nav>', html, re.S).group(0)
    return re.findall(r"<a [^>]*>([^<]+)</a>", nav)


def staff_pages(study) -> list[str]:
    return [
        reverse("dashboard"),
        reverse("study_list"),
        reverse("study_detail", args=[study.pk]),
        reverse("study_create"),
        reverse("study_quality", args=[study.pk]),
        reverse("study_adjudicate", args=[study.pk]),
        reverse("evaluation:study-report", args=[study.pk]),
        reverse("home"),
    ]


def test_every_staff_page_shows_the_same_navigation(staff_client):
    study = make_proxy_study(gold_positions=[0])
    for url in staff_pages(study):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert nav_links(response.content.decode()) == STAFF_LINKS, url


def test_the_current_page_is_marked_in_the_navigation(staff_client):
    study = make_proxy_study(gold_positions=[0])
    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert re.search(r'<a href="/studies/" aria-current="page">Studies</a>', html)
    assert html.count('aria-current="page"') == 1


def test_annotators_see_only_their_own_link(client):
    client.force_login(make_annotator())
    assert nav_links(client.get(reverse("home")).content.decode()) == ["My studies"]


def test_forbidden_and_missing_pages_are_styled_and_keep_the_navigation(client):
    client.force_login(make_annotator("ann"))
    forbidden = client.get(reverse("dashboard"))
    assert forbidden.status_code == 403
    html = forbidden.content.decode()
    assert "You may not open this page" in html and "ann" in html
    assert nav_links(html) == ["My studies"] and "marginalia.css" in html

    missing = client.get("/no-such-page/")
    assert missing.status_code == 404
    assert "Page not found" in missing.content.decode() and "marginalia.css" in missing.content.decode()


def test_the_server_error_and_bad_request_pages_render_without_a_request():
    for template, words in (("500.html", "Something went wrong"), ("400.html", "Bad request")):
        html = render_to_string(template)
        assert words in html and "marginalia.css" in html
        assert "Log out" not in html
