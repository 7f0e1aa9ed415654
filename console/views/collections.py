"""A collection's page: its sizes, its runs, its leaderboard and bundle, renaming it and deleting it
(refused while a study depends on it or a run of it is unfinished; its caches on disk go with it)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from retrieval import selectors
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.qrels_sources import qrels_choices
from retrieval.services.lifecycle import delete_collection, deletion_refusals, rename_collection
from retrieval.wording import counted


def _collection(collection_id: int):
    return get_object_or_404(selectors.collections_with_counts(), pk=collection_id)


@staff_required
def collection_detail(request, collection_id: int):
    collection = _collection(collection_id)
    return render(
        request,
        "console/collection_detail.html",
        {
            "collection": collection,
            "runs": selectors.runs_for_listing().filter(collection=collection),
            "qrels_choices": qrels_choices(collection),
            "deletion_refusals": deletion_refusals(collection),
        },
    )


@staff_required
@require_POST
def collection_rename(request, collection_id: int):
    collection = _collection(collection_id)
    old_name = collection.name
    try:
        rename_collection(collection, request.POST.get("name", ""))
    except InputError as error:
        messages.error(request, f"Not renamed: {error.message}.")
    else:
        messages.success(request, f"Collection “{old_name}” renamed to “{collection.name}”.")
    return redirect("collection_page", collection_id=collection.pk)


@staff_required
@require_POST
def collection_delete(request, collection_id: int):
    collection = _collection(collection_id)
    if request.POST.get("confirm", "").strip() != collection.name:
        messages.error(request, f"Not deleted: type the collection's name, “{collection.name}”, to confirm.")
        return redirect("collection_page", collection_id=collection.pk)
    try:
        summary = delete_collection(collection)
    except InputError as error:
        messages.error(request, f"{error.message}.")
        return redirect("collection_page", collection_id=collection.pk)
    messages.success(
        request,
        f"Collection “{summary['collection']}” deleted with {counted(summary['runs'], 'run')};"
        f" {counted(summary['caches_removed'], 'cache entry')} removed from disk.",
    )
    return redirect("dashboard")
