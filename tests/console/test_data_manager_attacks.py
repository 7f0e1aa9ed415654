"""Attacker-style tests of every data manager route (pages and REST, console/urls.py names
`data_*` and `api-data-*`): nobody but staff reaches one, whatever account they hold (a lab
annotator who judged the study, an invited scholar with a grant on it, a crowd participant who
came through its link, or nobody signed in), and nothing changes when they try. Staff sending
hostile bytes in any parameter or body get a 4xx (or the page's one line), never a 5xx or a
traceback, and nothing changes either.

The routes are read from the URL configuration, so a data manager route added later is swept
without naming it here."""

import json
import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from annotation.models import Judgment, Rework, Study, StudyGrant
from integrations.services.crowd import configure_crowd_link
from tests.annotation.test_attacks import session_client
from tests.console.test_data_queries import World
from tests.factories import api_client, make_annotator

pytestmark = pytest.mark.django_db

DATA_ROUTE_PREFIXES = ("data_", "api-data-")
# Every parameter any data manager table, jump, action or export reads.
PARAMETERS = [
    "status",
    "agreement",
    "flagged",
    "annotator",
    "judge",
    "adjudicated",
    "role",
    "search",
    "sort",
    "page",
    "per_page",
    "jump",
    "jump_by",
    "scope",
    "items",
    "format",
    "action",
    "reason",
    "relevant",
    "min_rank",
    "max_rank",
    "split",
    "quote_length",
    "judged",
    "qrels",
    "studied",
    "pooled",
    "next",
]
# Values a hostile or broken client sends: control characters, digits of other scripts, numbers
# beyond any column, markup, SQL, very long text, lists where text is expected.
HOSTILE_VALUES = (
    "\x00",
    "٣",
    "9" * 40,
    "-1",
    "0",
    "1e9",
    "<script>alert(1)</script>",
    "1' OR '1'='1",
    "x" * 5000,
    "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
)
# Query strings that are not valid percent-encoded UTF-8 at all.
RAW_QUERY_STRINGS = ("status=%ff%fe&page=%00", "search=%c3%28&sort=%", "items=1,%ff,2&scope=matching&format=csv")
HOSTILE_BODIES = (
    b"\xff\xfe\x00garbage",
    b"not json at all",
    b"[1, 2, 3]",
    b'"a string"',
    b"12",
    b'{"items": {"a": 1}, "reason": ["x"]}',
    b'{"items": [99999999999999999999999], "reason": "why"}',
    b'{"items": [1.5, true, null], "reason": "why"}',
    b'{"scope": "matching", "reason": {"nested": 1}}',
    b'{"allow_revisions": "yes"}',
    b'{"scope": "matching", "status": "\\u0000", "reason": "why"}',
)


@pytest.fixture
def world():
    return World()


def data_routes(patterns=None, prefix: str = "") -> list[tuple[str, str]]:
    """(name, full route) of every data manager route in the URL configuration."""
    found = []
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            found += data_routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and (pattern.name or "").startswith(DATA_ROUTE_PREFIXES):
            found.append((pattern.name, prefix + str(pattern.pattern)))
    return found


def route_paths(world: World) -> list[tuple[str, str]]:
    """(name, path) of every data manager route, with the world's own ids filled in."""
    item = world.study.items.order_by("position").first()
    ids = {
        "study_id": world.study.pk,
        "item_id": item.pk,
        "judgment_id": Judgment.objects.filter(item=item).values_list("pk", flat=True).first(),
        "run_id": world.run.pk,
        "query_id": item.query_id,
        "collection_id": world.collection.pk,
    }
    paths = []
    for name, route in data_routes():
        names = re.findall(r"<(?:\w+:)?(\w+)>", route)
        paths.append((name, reverse(name, kwargs={part: ids[part] for part in names})))
    return paths


def snapshot() -> tuple:
    """Everything an action on the data manager could change."""
    return (
        sorted(Judgment.objects.values_list("pk", "voided", "void_reason", "label", "revision")),
        sorted(Study.objects.values_list("pk", "allow_revisions")),
        Rework.objects.count(),
    )


def crowd_participant(study: Study) -> Client:
    """A browser signed in as a participant who came through the study's crowd link."""
    link = configure_crowd_link(study, completion_code="C", quota=2)
    browser = Client()
    browser.get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": "P-attacker", "SESSION_ID": "S1"})
    assert browser.session.get("_auth_user_id")
    return browser


def test_the_sweep_covers_every_table_detail_action_and_export():
    routes = data_routes()
    names = {name for name, _ in routes}
    assert {"data_study_items", "data_study_items_bulk", "api-data-study-void", "api-data-study-send-back"} <= names
    assert {"api-data-study-revisions", "data_run_query", "api-data-collection-export"} <= names
    assert len(names) == len(routes) >= 20


def test_no_account_but_staff_reaches_any_data_manager_route_and_nothing_changes(world):
    ada = world.people[0]  # judged the study's items
    scholar = make_annotator("invited-scholar")
    StudyGrant.objects.create(study=world.study, annotator=scholar)
    Study.objects.filter(pk=world.study.pk).update(allow_revisions=False)
    before = snapshot()
    clients = {
        "annotator (token)": api_client(ada),
        "annotator (session)": session_client(ada),
        "invited scholar": session_client(scholar),
        "crowd participant": crowd_participant(world.study),
        "anonymous (session)": Client(),
        "anonymous (REST)": api_client(),
    }
    item = world.study.items.order_by("position").first()
    body = {"items": [item.pk], "scope": "matching", "reason": "attack", "allow_revisions": True, "format": "json"}
    for who, client in clients.items():
        for name, path in route_paths(world):
            for method in ("get", "post", "put"):
                if method == "get":
                    response = client.get(path, body)
                elif hasattr(client, "force_authenticate"):
                    response = getattr(client, method)(path, body, format="json")
                else:
                    response = client.generic(method.upper(), path, json.dumps(body), content_type="application/json")
                # A page knows no token: a token-only caller is signed out there, as nobody is.
                signed_out = who.startswith("anonymous") or who.endswith("(token)")
                if signed_out and response.status_code == 302:
                    assert response["Location"].startswith("/accounts/login/"), (who, name, method)
                else:
                    assert response.status_code in (401, 403, 405), (who, name, method, response.status_code)
                text = b"".join(response.streaming_content) if response.streaming else response.content
                assert b"attack" not in text and world.staff.username.encode() not in text, (who, name, method)
    assert snapshot() == before


def test_hostile_parameters_on_every_route_answer_4xx_or_the_page_never_a_traceback(world):
    staff_rest, staff_pages = api_client(world.staff), session_client(world.staff)
    before = snapshot()
    for name, path in route_paths(world):
        client = staff_rest if name.startswith("api-") else staff_pages
        # Each value in every parameter at once, then each parameter alone with one of the values.
        asks = [dict.fromkeys(PARAMETERS, value) for value in HOSTILE_VALUES]
        asks += [{parameter: HOSTILE_VALUES[index % len(HOSTILE_VALUES)]} for index, parameter in enumerate(PARAMETERS)]
        for params in asks:
            response = client.get(path, params)
            assert response.status_code < 500, (name, params, response.status_code)
            if not response.streaming:
                assert b"Traceback" not in response.content, (name, params)
            else:
                b"".join(response.streaming_content)  # the whole stream is written without failing
        for raw in RAW_QUERY_STRINGS:
            response = client.generic("GET", f"{path}?{raw}")
            assert response.status_code < 500 and b"Traceback" not in getattr(response, "content", b""), (name, raw)
    assert snapshot() == before


def test_hostile_bodies_on_every_action_are_refused_and_change_nothing(world):
    staff_rest, staff_pages = Client(), session_client(world.staff)
    staff_rest.force_login(world.staff)
    before = snapshot()
    for name, path in route_paths(world):
        client = staff_rest if name.startswith("api-") else staff_pages
        for body in HOSTILE_BODIES:
            for method in ("post", "put"):
                response = client.generic(method.upper(), path, body, content_type="application/json")
                assert response.status_code < 500, (name, method, body, response.status_code)
                if not response.streaming:
                    assert b"Traceback" not in response.content, (name, body)
                if name.startswith("api-") and response.status_code not in (403, 405):
                    assert 400 <= response.status_code < 500, (name, method, body, response.status_code)
            form = client.post(path, {"items": ["\x00", "-3", "9" * 30], "reason": "x" * 3000, "action": "void"})
            assert form.status_code < 500, (name, form.status_code)
    assert snapshot() == before
