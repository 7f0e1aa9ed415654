"""The data manager's pages: a study's items, a run's queries and a collection's queries as
tables (filters, sort, search, jump, server-side pages), their detail pages, the bulk actions
on a selection or on every row matching the filter (void, send back to the queue, export) and
the study's revision setting. Thin: reads come from console.data_selectors / data_queries,
actions from console.data_actions and annotation.services (REST calls the same functions).
A refused parameter shows as one line above the table (400); actions go back to the page they
came from (post/redirect/get)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.models import Item, Judgment, Study
from annotation.services import void_judgment
from annotation.services.rework import send_back
from console.data_actions import (
    bulk_action,
    collection_query_export,
    download,
    item_export,
    run_query_export,
)
from console.data_filters import PER_PAGE_CHOICES, YES_NO
from console.data_queries import (
    COLLECTION_QUERY_SORTS,
    COLLECTION_YES_NO,
    RUN_QUERY_SORTS,
    collection_query_detail,
    collection_query_jump,
    collection_query_table,
    run_query_detail,
    run_query_jump,
    run_query_table,
)
from console.data_queries import JUMP_BY as QUERY_JUMP_BY
from console.data_selectors import (
    AGREEMENTS,
    ITEM_SORTS,
    ITEM_STATUSES,
    item_detail,
    item_of,
    item_table,
    jump_target,
)
from console.data_selectors import JUMP_BY as ITEM_JUMP_BY
from judges.models import Judge
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.models import Collection, Query, Run, RunQuery
from retrieval.wording import counted


def _table(request, template: str, context: dict, read, *, sorts: dict, jump_by: dict, export_formats: dict):
    """Render a table page; a refused parameter re-renders it unfiltered with the reason (400)."""
    try:
        table = read(request.GET)
        status = 200
    except InputError as error:
        table, status = read({}), 400
        context["error"] = str(error)
    return render(
        request,
        template,
        {
            **context,
            **table,
            "per_page_choices": PER_PAGE_CHOICES,
            "sort_labels": sorts.items(),
            "jump_choices": jump_by.items(),
            "export_formats": export_formats.items(),
        },
        status=status,
    )


JUDGMENT_EXPORT_LABELS = {"json": "JSON", "csv": "CSV", "jsonl": "JSON lines"}
RUN_EXPORT_LABELS = {"trec": "TREC run file", "ranks": "exact relevant ranks (JSON lines)"}


def _back(request, fallback: str) -> str:
    """Where an action returns: the page it came from (its own filters kept), when local."""
    back = request.POST.get("next", "")
    return back if back.startswith("/") and not back.startswith("//") else fallback


# --- a study's items ---------------------------------------------------------------------------------


def _study(study_id: int) -> Study:
    return get_object_or_404(Study.objects.select_related("collection"), pk=study_id)


@staff_required
def study_items(request, study_id: int):
    """The study's items table."""
    study = _study(study_id)
    people = get_user_model().objects.filter(
        Exists(Judgment.objects.filter(annotator=OuterRef("pk"), item__study=study))
    )
    context = {
        "study": study,
        "statuses": ITEM_STATUSES,
        "agreements": AGREEMENTS,
        "roles": Item.Role.choices,
        "annotator_names": people.order_by("username").values_list("username", flat=True),
        "judge_names": Judge.objects.order_by("name").values_list("name", flat=True).distinct(),
    }
    return _table(
        request,
        "console/data_items.html",
        context,
        lambda params: item_table(study, params),
        sorts=ITEM_SORTS,
        jump_by=ITEM_JUMP_BY,
        export_formats=JUDGMENT_EXPORT_LABELS,
    )


@staff_required
def study_item_jump(request, study_id: int):
    """Open the item a position or an id names; back to the table with the reason otherwise."""
    study = _study(study_id)
    try:
        item = jump_target(study, request.GET)
    except InputError as error:
        messages.error(request, f"Nothing to open: {error.message}.")
        return redirect("data_study_items", study_id=study.pk)
    return redirect("data_study_item", study_id=study.pk, item_id=item.pk)


@staff_required
def study_item(request, study_id: int, item_id: int):
    study = _study(study_id)
    item = item_of(study, item_id)
    if item is None:
        raise Http404("no such item in this study")
    return render(request, "console/data_item.html", {"study": study, "detail": item_detail(study, item)})


@staff_required
@require_POST
def study_item_void(request, study_id: int, item_id: int, judgment_id: int):
    """Void one judgment from the item's detail, with a reason (annotation's void_judgment)."""
    judgment = get_object_or_404(Judgment, pk=judgment_id, item_id=item_id, item__study_id=study_id)
    try:
        void_judgment(judgment, by=request.user, reason=request.POST.get("reason", ""))
    except InputError as error:
        messages.error(request, f"Judgment {judgment.pk} was not voided: {error.message}.")
    else:
        messages.success(request, f"Judgment {judgment.pk} by {judgment.annotator} voided; its slot is open again.")
    return redirect("data_study_item", study_id=study_id, item_id=item_id)


@staff_required
@require_POST
def study_item_send_back(request, study_id: int, item_id: int):
    """Send one item back to the queue from its detail."""
    study = _study(study_id)
    item = item_of(study, item_id)
    if item is None:
        raise Http404("no such item in this study")
    try:
        result = send_back(
            study, study.items.filter(pk=item.pk), by=request.user, reason=request.POST.get("reason", "")
        )
    except InputError as error:
        messages.error(request, f"Not sent back: {error.message}.")
    else:
        messages.success(request, _sent_back_message(result))
    return redirect("data_study_item", study_id=study.pk, item_id=item.pk)


def _sent_back_message(result) -> str:
    if not result.items:
        return "Nothing was sent back: the items chosen have no live judgments, so they are in the queue already."
    withdrawn = (
        f", {counted(result.withdrawn_decisions, 'adjudication decision')} withdrawn"
        if result.withdrawn_decisions
        else ""
    )
    return (
        f"{counted(result.items, 'item')} sent back to the queue: {counted(result.voided, 'judgment')} voided"
        f"{withdrawn}, each item's send-back recorded with its reason; their slots are open again."
    )


@staff_required
@require_POST
def study_items_bulk(request, study_id: int):
    """Void or send back the items chosen, or all matching the filter; then back to the table."""
    study = _study(study_id)
    back = _back(request, reverse("data_study_items", args=[study.pk]))
    try:
        result = bulk_action(study, request.POST, request.POST.getlist("items"), by=request.user)
    except InputError as error:
        messages.error(request, f"Nothing was done: {error.message}.")
        return redirect(back)
    if request.POST.get("action") == "void":
        messages.success(
            request,
            f"{counted(result.voided, 'judgment')} of {counted(result.items, 'item')} voided; their slots are open "
            "again.",
        )
    else:
        messages.success(request, _sent_back_message(result))
    return redirect(back)


@staff_required
@require_POST
def study_items_export(request, study_id: int):
    """The judgments of the items chosen (or all matching), as the judgment exports write them."""
    study = _study(study_id)
    try:
        wanted, chunks = item_export(study, request.POST, request.POST.getlist("items"))
    except InputError as error:
        messages.error(request, f"Nothing exported: {error.message}.")
        return redirect(_back(request, reverse("data_study_items", args=[study.pk])))
    return download(chunks, f"study-{study.pk}-selection-judgments", wanted)


@staff_required
@require_POST
def study_revisions_setting(request, study_id: int):
    """Turn annotators' revisions of their earlier answers on or off for the study."""
    study = _study(study_id)
    allowed = request.POST.get("allow_revisions") == "on"
    Study.objects.filter(pk=study.pk).update(allow_revisions=allowed)
    messages.success(
        request,
        "Annotators may now revise their earlier answers in this study (each revision is recorded)."
        if allowed
        else "Annotators can no longer revise their answers in this study; recorded revisions stay.",
    )
    return redirect(_back(request, reverse("data_study_items", args=[study.pk])))


# --- a run's queries -----------------------------------------------------------------------------------


def _run(run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("retriever", "collection"), pk=run_id)


@staff_required
def run_queries(request, run_id: int):
    run = _run(run_id)
    return _table(
        request,
        "console/data_run_queries.html",
        {"run": run},
        lambda params: run_query_table(run, params),
        sorts=RUN_QUERY_SORTS,
        jump_by=QUERY_JUMP_BY,
        export_formats=RUN_EXPORT_LABELS,
    )


@staff_required
def run_query_jump_view(request, run_id: int):
    run = _run(run_id)
    try:
        query = run_query_jump(run, request.GET)
    except InputError as error:
        messages.error(request, f"Nothing to open: {error.message}.")
        return redirect("data_run_queries", run_id=run.pk)
    return redirect("data_run_query", run_id=run.pk, query_id=query.pk)


@staff_required
def run_query(request, run_id: int, query_id: int):
    run = _run(run_id)
    if not RunQuery.objects.filter(run=run, query_id=query_id).exists():
        raise Http404("the run has no result for this query")
    query = get_object_or_404(Query, pk=query_id)
    return render(request, "console/data_run_query.html", {"run": run, "detail": run_query_detail(run, query)})


@staff_required
@require_POST
def run_queries_export(request, run_id: int):
    run = _run(run_id)
    try:
        wanted, chunks = run_query_export(run, request.POST, request.POST.getlist("items"))
    except InputError as error:
        messages.error(request, f"Nothing exported: {error.message}.")
        return redirect(_back(request, reverse("data_run_queries", args=[run.pk])))
    return download(chunks, f"{run.tag}-selection", wanted)


# --- a collection's queries ------------------------------------------------------------------------------


def _collection(collection_id: int) -> Collection:
    return get_object_or_404(Collection, pk=collection_id)


@staff_required
def collection_queries(request, collection_id: int):
    collection = _collection(collection_id)

    def read(params) -> dict:
        table = collection_query_table(collection, params)
        filters = table["filters"]
        yes_no = [
            {"name": name, "label": label, "value": getattr(filters, name)} for name, label in COLLECTION_YES_NO.items()
        ]
        return {**table, "yes_no_filters": yes_no}

    return _table(
        request,
        "console/data_collection_queries.html",
        {"collection": collection, "yes_no": YES_NO},
        read,
        sorts=COLLECTION_QUERY_SORTS,
        jump_by=QUERY_JUMP_BY,
        export_formats=JUDGMENT_EXPORT_LABELS,
    )


@staff_required
def collection_query_jump_view(request, collection_id: int):
    collection = _collection(collection_id)
    try:
        query = collection_query_jump(collection, request.GET)
    except InputError as error:
        messages.error(request, f"Nothing to open: {error.message}.")
        return redirect("data_collection_queries", collection_id=collection.pk)
    return redirect("data_collection_query", collection_id=collection.pk, query_id=query.pk)


@staff_required
def collection_query(request, collection_id: int, query_id: int):
    collection = _collection(collection_id)
    query = get_object_or_404(Query, pk=query_id, collection=collection)
    return render(
        request,
        "console/data_collection_query.html",
        {"collection": collection, "detail": collection_query_detail(collection, query)},
    )


@staff_required
@require_POST
def collection_queries_export(request, collection_id: int):
    collection = _collection(collection_id)
    try:
        wanted, chunks = collection_query_export(collection, request.POST, request.POST.getlist("items"))
    except InputError as error:
        messages.error(request, f"Nothing exported: {error.message}.")
        return redirect(_back(request, reverse("data_collection_queries", args=[collection.pk])))
    return download(chunks, f"collection-{collection.pk}-queries", wanted)
