"""The annotation web pages: the annotator's home and annotation page, and the staff pages to
create studies, follow them and void judgments. Thin: every rule lives in
`annotation.services`, every read in `annotation.selectors` / `annotation.ui_selectors`."""
from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from retrieval.errors import InputError

from .forms import JudgmentForm, ProxyStudyForm, VoidJudgmentForm
from .models import Item, Judgment, Study
from .services import (
    AnnotationForbidden,
    SubmissionRejected,
    create_proxy_study,
    next_work,
    submit_judgment,
    void_judgment,
)
from .ui_selectors import annotation_page, annotator_studies, staff_studies, staff_study_items, staff_study_summary


def staff_required(view):
    """Signed-out visitors go to the login page; signed-in non-staff get 403."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("staff only")
        return view(request, *args, **kwargs)

    return guarded


@login_required
def home(request):
    return render(request, "annotation/home.html", {"studies": annotator_studies(request.user)})


@login_required
def annotate(request, study_id: int):
    """GET: the annotator's current item (their live claim again, else a new one) or the end of
    the study. POST: store the answer, then show the next item (post/redirect/get)."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        if request.method == "POST":
            _submit(request, study)
            return redirect("annotate", study_id=study.pk)
        work = next_work(study, request.user)
    except AnnotationForbidden as refusal:
        return render(request, "annotation/refused.html", {"study": study, "reason": str(refusal)}, status=403)
    return render(request, "annotation/annotate.html", {"study": study, "work": annotation_page(work)})


def _submit(request, study: Study) -> None:
    form = JudgmentForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            messages.error(request, " ".join(errors))
        return
    item = Item.objects.filter(study=study, pk=form.cleaned_data["item"]).first()
    if item is None:
        messages.error(request, "That item is not part of this study.")
        return
    try:
        submission = submit_judgment(
            annotator=request.user, item=item, position=form.cleaned_data["choice"],
            seconds=form.cleaned_data["seconds"] or None,
        )
    except SubmissionRejected as rejection:
        messages.error(request, f"Your answer was not stored: {rejection}.")
        return
    if not submission.created:
        messages.info(request, "You had already answered that item; your first answer stands.")


@staff_required
def study_list(request):
    return render(request, "annotation/study_list.html", {"rows": staff_studies()})


@staff_required
def study_create(request):
    form = ProxyStudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            creation = create_proxy_study(**form.cleaned_data, created_by=request.user)
        except InputError as error:
            form.add_service_error(error)
        else:
            skipped = f"; {len(creation.skipped)} queries skipped" if creation.skipped else ""
            messages.success(
                request, f"Study “{creation.study.name}” created with {creation.items} items{skipped}."
            )
            return redirect("study_detail", study_id=creation.study.pk)
    return render(request, "annotation/study_form.html", {"form": form})


@staff_required
def study_detail(request, study_id: int):
    study = get_object_or_404(Study.objects.select_related("collection", "negatives_run"), pk=study_id)
    return render(request, "annotation/study_detail.html", {
        "study": study,
        "overview": staff_study_summary(study),
        "items": staff_study_items(study),
    })


@staff_required
@require_POST
def judgment_void(request, study_id: int, judgment_id: int):
    judgment = get_object_or_404(Judgment, pk=judgment_id, item__study_id=study_id)
    form = VoidJudgmentForm(request.POST)
    if form.is_valid():
        void_judgment(judgment, by=request.user, reason=form.cleaned_data["reason"])
        messages.success(
            request, f"Judgment {judgment.pk} by {judgment.annotator} voided; its item is back in the queue."
        )
    else:
        messages.error(request, f"Judgment {judgment.pk} was not voided: a reason is required.")
    return redirect(reverse("study_detail", args=[study_id]) + f"#item-{judgment.item_id}")
