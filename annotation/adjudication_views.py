"""The adjudication workspace's pages: the queue, one item at a time with every answer side by
side, deciding, sending back, and (staff) the sample of agreed items and the reasons lists.
Thin: the rules live in `annotation.services.adjudication`, the reads in
`annotation.adjudication_selectors`. Staff and accounts with the adjudicate permission reach
these pages (the service says where); everything else staff see stays staff's."""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.input_rules import parse_id

from .adjudication_selectors import queue_page_rows, workspace_page
from .forms import AdjudicationForm, AdjudicationReasonsForm, AdjudicationSampleForm, SendBackForm
from .models import Item, Study
from .services.adjudication import (
    decide,
    next_undecided,
    reasons,
    require_adjudicator,
    send_back,
    set_reasons,
    set_sample_rate,
    work_item,
)


def adjudicator_required(view):
    """Signed-out visitors go to sign in; accounts that may not adjudicate the study get 403
    with the reason. The view receives the study."""

    @login_required
    @wraps(view)
    def guarded(request, study_id: int, *args, **kwargs):
        study = get_object_or_404(Study, pk=study_id)
        require_adjudicator(study, request.user)
        return view(request, study, *args, **kwargs)

    return guarded


def _item(study: Study, item_id: int) -> Item:
    try:
        return work_item(study, item_id)
    except Item.DoesNotExist as missing:
        raise Http404(str(missing)) from missing


def _queue_url(study: Study) -> str:
    return reverse("study_adjudicate", args=[study.pk])


def _next_url(study: Study, after: Item | None) -> str:
    """The next undecided item after `after`, or the queue page with a word when none is left."""
    following = next_undecided(study, after)
    if following is None:
        return _queue_url(study) + "?done=1"
    return reverse("item_adjudicate", args=[study.pk, following])


@adjudicator_required
def study_adjudicate(request, study: Study):
    """The queue: items by agreement, lowest first, with their status; staff also set the
    sample of agreed items and the reasons lists here."""
    staff = request.user.is_staff
    rows, page, counts = queue_page_rows(study, request.GET.get("page", 1), staff=staff)
    study_reasons = reasons(study)
    context = {
        "study": study,
        "rows": rows,
        "page": page,
        "counts": counts,
        "staff": staff,
        "finished": request.GET.get("done") == "1" and counts["undecided"] == 0,
        "reasons": study_reasons,
        "study_reasons_text": "\n".join(study_reasons.texts) if study_reasons.scope == "study" else "",
        "global_reasons_text": "\n".join(reasons(None).texts),
    }
    return render(request, "annotation/adjudication_queue.html", context)


@adjudicator_required
def adjudication_next(request, study: Study):
    """The next-item step: the first undecided item after `?after=ITEM` (or from the top)."""
    after = parse_id(request.GET.get("after", ""))
    item = Item.objects.filter(study=study, pk=after).first() if after is not None else None
    return redirect(_next_url(study, item))


@adjudicator_required
def item_adjudicate(request, study: Study, item_id: int):
    """GET: the item with every answer side by side and the decision form. POST: decide it,
    then go on to the next undecided item."""
    item = _item(study, item_id)
    if request.method == "POST":
        form = AdjudicationForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Not decided: " + " ".join(e for errors in form.errors.values() for e in errors))
            return redirect("item_adjudicate", study.pk, item.pk)
        try:
            decide(item, by=request.user, **form.decision())
        except InputError as error:
            messages.error(request, f"Item {item.position + 1} was not decided: {error.message}.")
            return redirect("item_adjudicate", study.pk, item.pk)
        messages.success(request, f"Item {item.position + 1} decided.")
        return redirect(_next_url(study, item))
    page = workspace_page(item, staff=request.user.is_staff)
    return render(request, "annotation/adjudication_item.html", {"study": study, "item": page})


@adjudicator_required
@require_POST
def item_send_back(request, study: Study, item_id: int):
    """Send the item back for a fresh round of judgments, with a reason; then the next item."""
    item = _item(study, item_id)
    form = SendBackForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not sent back: " + " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("item_adjudicate", study.pk, item.pk)
    try:
        send_back(item, by=request.user, reason=form.cleaned_data["reason"], note=form.cleaned_data["note"])
    except InputError as error:
        messages.error(request, f"Item {item.position + 1} was not sent back: {error.message}.")
        return redirect("item_adjudicate", study.pk, item.pk)
    messages.success(request, f"Item {item.position + 1} sent back for a fresh round of judgments.")
    return redirect(_next_url(study, item))


@staff_required
@require_POST
def adjudication_sample(request, study_id: int):
    """Staff: the share of agreed items the queue also shows."""
    study = get_object_or_404(Study, pk=study_id)
    form = AdjudicationSampleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Sample unchanged: " + " ".join(e for errors in form.errors.values() for e in errors))
        return redirect(_queue_url(study))
    queue = set_sample_rate(study, form.cleaned_data["sample_rate"] / 100)
    messages.success(request, f"The queue now samples {queue.sampled} agreed item{'s' if queue.sampled != 1 else ''}.")
    return redirect(_queue_url(study))


@staff_required
@require_POST
def adjudication_reasons(request, study_id: int):
    """Staff: the study's own reasons list (empty: the global list)."""
    study = get_object_or_404(Study, pk=study_id)
    return _save_reasons(request, study, _queue_url(study))


@staff_required
@require_POST
def adjudication_global_reasons(request):
    """Staff: the global reasons list (empty: the default list), from a study's queue page."""
    back = request.POST.get("next", "")
    return _save_reasons(request, None, back if back.startswith("/studies/") else reverse("study_list"))


def _save_reasons(request, study: Study | None, back: str):
    form = AdjudicationReasonsForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Reasons unchanged: " + " ".join(e for errors in form.errors.values() for e in errors))
        return redirect(back)
    try:
        saved = set_reasons(study, form.reasons_list())
    except InputError as error:
        messages.error(request, f"Reasons unchanged: {error.message}.")
    else:
        where = "this study" if study else "studies without their own list"
        messages.success(request, f"Reasons for {where}: {', '.join(saved.texts)}.")
    return redirect(back)
