"""Honest commands, the same in the command line, the dashboard's form and the API: a run on a
collection without queries is refused with how to add some; context L/R on a collection whose
queries have no context is ignored, stored as null and said as a warning; summaries count in
words that agree with their numbers."""

import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from retrieval.models import Run
from retrieval.wording import counted
from tests.factories import (
    api_client,
    make_collection,
    make_relic_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

HOW_TO_ADD = "add queries by importing a RELiC JSON file (manage.py import_relic) or a BEIR folder with queries.jsonl"


def book_without_queries():
    collection = make_collection("a book", kind="book")
    make_text_passages(collection, ["Once upon a time.", "The end."])
    return collection


def beir_collection():
    collection = make_collection("plain queries")
    make_text_passages(collection, ["harbour costs", "ships in port"])
    make_text_query(collection, "harbour")
    return collection


def run_form(collection, **fields):
    return {
        "collection": collection.pk,
        "retriever": "bm25",
        "k1": "0.5",
        "b": "0.9",
        "context_left": "4",
        "context_right": "4",
        "depth": "10",
        "model": "",
        **fields,
    }


def test_a_run_without_queries_is_refused_in_the_command_line_form_and_api(staff_client):
    collection = book_without_queries()
    with pytest.raises(CommandError, match=f"collection 'a book' has no queries.*{re.escape(HOW_TO_ADD)}"):
        call_command("retrieve", "--collection", "a book", "--retriever", "bm25")

    form = staff_client.post(reverse("dashboard"), run_form(collection))
    assert form.status_code == 400 and HOW_TO_ADD in form.content.decode()

    api = api_client(make_user(staff=True)).post("/api/runs/", {"collection": collection.pk, "retriever": "bm25"})
    assert api.status_code == 400 and HOW_TO_ADD in api.json()["collection"][0]
    assert not Run.objects.exists()


def test_context_without_contexts_is_ignored_with_a_warning_everywhere(
    staff_client, capsys, django_capture_on_commit_callbacks
):
    collection = beir_collection()
    warning = "context 4/4 ignored: the queries of collection 'plain queries' have no context sentences"

    call_command("retrieve", "--collection", "plain queries", "--retriever", "bm25", "--context", "4/4")
    assert f"warning: {warning}" in capsys.readouterr().err
    with django_capture_on_commit_callbacks(execute=False):
        form = staff_client.post(reverse("dashboard"), run_form(collection), follow=True)
        api = api_client(make_user(staff=True)).post(
            "/api/runs/", {"collection": collection.pk, "retriever": "bm25", "context_left": 4, "context_right": 4}
        )
    in_html = warning.replace("'", "&#x27;")
    assert in_html in form.content.decode()
    assert api.status_code == 202 and api.json()["warnings"][0].startswith(warning)
    for run in Run.objects.all():
        assert (run.parameters["context_left"], run.parameters["context_right"]) == (None, None)
    page = staff_client.get(reverse("run_page", args=[api.json()["id"]])).content.decode()
    assert "(the queries have no context sentences)" in page and in_html in page


def test_no_warning_when_no_context_is_asked_for_or_the_queries_have_context(staff_client, capsys):
    beir_collection()
    call_command("retrieve", "--collection", "plain queries", "--retriever", "bm25", "--context", "0/0")
    make_relic_collection(1, name="with contexts")
    call_command("retrieve", "--collection", "with contexts", "--retriever", "bm25", "--context", "2/1")
    assert "warning" not in capsys.readouterr().err
    relic_run = Run.objects.get(collection__name="with contexts")
    assert (relic_run.parameters["context_left"], relic_run.parameters["context_right"]) == (2, 1)
    assert "warnings" not in relic_run.parameters


@pytest.mark.parametrize(
    "count, noun, words",
    [
        (1, "candidate", "1 candidate"),
        (2, "candidate", "2 candidates"),
        (1, "query", "1 query"),
        (0, "query", "0 queries"),
        (3, "cache entry", "3 cache entries"),
        (2, "box", "2 boxes"),
        (2, "day", "2 days"),
    ],
)
def test_counts_agree_with_their_nouns(count, noun, words):
    assert counted(count, noun) == words
