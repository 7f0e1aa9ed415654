"""The annotator's "your answers" pages, where a study allows revisions: the list of their own
answers in the study, and the page that revises one (post/redirect/get). Thin: the rules are
annotation.services.revisions'; the page's form and layout annotation.revision_forms'. Another
annotator's answer, an unjudged item and another study's item all answer 404 alike."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from .models import Study
from .revision_forms import RevisionForm, revision_page
from .services import AnnotationForbidden, SubmissionRejected
from .services.revisions import ensure_revisions_open, my_answers, own_judgment, revise_judgment


def _refused(request, study: Study, refusal: AnnotationForbidden):
    return render(request, "annotation/refused.html", {"study": study, "reason": str(refusal)}, status=403)


@login_required
def answers(request, study_id: int):
    """The annotator's answers in the study, newest first, each with a link to revise it."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        ensure_revisions_open(study, request.user)
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    rows, page = my_answers(study, request.user, request.GET.get("page", 1))
    return render(request, "annotation/my_answers.html", {"study": study, "rows": rows, "page": page})


@login_required
def answer_revise(request, study_id: int, item_id: int):
    """GET: the item as shown, with the annotator's current answer marked. POST: the revision."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        ensure_revisions_open(study, request.user)
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    judgment = own_judgment(study, request.user, item_id)
    if judgment is None:
        raise Http404("you have no answer to this item")
    if request.method == "POST":
        if _revise(request, study, judgment):
            return redirect("my_answers", study_id=study.pk)
        return redirect("answer_revise", study_id=study.pk, item_id=judgment.item_id)
    return render(
        request,
        "annotation/revise_answer.html",
        {"study": study, "page": revision_page(study, judgment), "judgment": judgment},
    )


def _revise(request, study: Study, judgment) -> bool:
    """Store the posted revision; messages say what happened. True when it was stored or was
    the same answer, False when the page should show the answer again with the reason."""
    form = RevisionForm(request.POST, study=study, item=judgment.item, current_spans=judgment.spans)
    if not form.is_valid():
        for errors in form.errors.values():
            messages.error(request, " ".join(errors))
        return False
    try:
        revision = revise_judgment(judgment, request.user, **form.answer())
    except (SubmissionRejected, AnnotationForbidden) as rejection:
        messages.error(request, f"Your revision was not stored: {rejection}.")
        return False
    if revision.created:
        messages.success(
            request, f"Your answer was revised (answer {revision.judgment.revision}); the earlier one is kept."
        )
    else:
        messages.info(request, "That is your current answer already; nothing changed.")
    return True
