"""The collection page: rename (names stay unique), delete with its runs and its caches on disk,
refused while a study is built on it (annotation answers retrieval's deletion signal); staff only."""

import numpy as np
import pytest
from django.urls import reverse

from retrieval import bm25
from retrieval.models import Collection, Passage, Run
from retrieval.services.lifecycle import collection_cache_paths, delete_collection
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever, term_counts_folder
from tests.factories import make_annotator, make_collection, make_relic_collection, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def test_staff_rename_a_collection(staff_client):
    collection = make_collection("old name")
    response = staff_client.post(
        reverse("collection_rename", args=[collection.pk]), {"name": " new name "}, follow=True
    )
    collection.refresh_from_db()
    assert collection.name == "new name"
    assert "Collection “old name” renamed to “new name”." in response.content.decode()


def test_a_name_already_taken_is_refused(staff_client):
    make_collection("taken")
    collection = make_collection("mine")
    response = staff_client.post(reverse("collection_rename", args=[collection.pk]), {"name": "taken"}, follow=True)
    assert "Not renamed: a collection named &#x27;taken&#x27; already exists." in response.content.decode()
    collection.refresh_from_db()
    assert collection.name == "mine"


@pytest.fixture
def every_set_cached(monkeypatch):
    """These collections are tiny; BM25 caches only candidate sets worth reading back, so let it
    cache every set here: deleting the caches is what is under test."""
    monkeypatch.setattr(bm25, "SMALLEST_CACHED_SET", 1)


@pytest.mark.usefixtures("every_set_cached")
def test_deleting_a_collection_removes_its_rows_runs_and_caches_on_disk(
    staff_client, data_dir, django_capture_on_commit_callbacks
):
    collection = make_relic_collection(2, name="to delete")
    execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=5))
    embeddings = data_dir / "embeddings" / "model-key" / f"collection-{collection.pk}"
    embeddings.mkdir(parents=True)
    np.savez(embeddings / "segment.npz", vectors=np.zeros((1, 2)))
    other = data_dir / "embeddings" / "model-key" / "collection-999999"
    other.mkdir()
    caches = collection_cache_paths(collection)
    assert embeddings in caches and any(path.parent == term_counts_folder() for path in caches)

    with django_capture_on_commit_callbacks(execute=True):  # the caches go once the delete commits
        response = staff_client.post(
            reverse("collection_delete", args=[collection.pk]), {"confirm": "to delete"}, follow=True
        )

    assert "Collection “to delete” deleted with 1 run;" in response.content.decode()
    assert not Collection.objects.filter(pk=collection.pk).exists()
    assert not Run.objects.exists() and not Passage.objects.exists()
    assert not any(path.exists() for path in caches)
    assert other.exists()


def test_deleting_needs_the_name_typed(staff_client):
    collection = make_collection("keep me")
    response = staff_client.post(reverse("collection_delete", args=[collection.pk]), {"confirm": "keep"}, follow=True)
    assert "type the collection&#x27;s name" in response.content.decode()
    assert Collection.objects.filter(pk=collection.pk).exists()


@pytest.mark.usefixtures("every_set_cached")
def test_a_collection_a_study_is_built_on_cannot_be_deleted_and_keeps_its_caches(staff_client):
    study = make_relic_proxy_study(2, name="built on it")
    collection = study.collection
    execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=5))
    caches = collection_cache_paths(collection)

    response = staff_client.post(
        reverse("collection_delete", args=[collection.pk]), {"confirm": collection.name}, follow=True
    )

    assert "cannot be deleted: study &#x27;built on it&#x27; is built on it" in response.content.decode()
    assert Collection.objects.filter(pk=collection.pk).exists()
    assert caches and all(path.exists() for path in caches)
    page = staff_client.get(reverse("collection_page", args=[collection.pk])).content.decode()
    assert "It cannot be deleted now: study &#x27;built on it&#x27; is built on it" in page


def test_the_service_refuses_too(db):
    study = make_relic_proxy_study(2, name="s")
    with pytest.raises(Exception, match="study 's' is built on it"):
        delete_collection(study.collection)


@pytest.mark.parametrize(
    "method, name, data",
    [
        ("get", "collection_page", {}),
        ("post", "collection_rename", {"name": "hijacked"}),
        ("post", "collection_delete", {"confirm": "victim"}),
    ],
)
def test_only_staff_reach_collection_pages(client, method, name, data):
    collection = make_collection("victim")
    url = reverse(name, args=[collection.pk])
    anonymous = getattr(client, method)(url, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    client.force_login(make_annotator())
    assert getattr(client, method)(url, data).status_code == 403
    assert Collection.objects.get(pk=collection.pk).name == "victim"
