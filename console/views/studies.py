"""The staff study pages (moved here from annotation/views.py; same URLs and names): the list of
studies and a study's page with its items (the text annotators read), answers with rationales and
marked excerpts, per-annotator progress, exports, the training form, voiding, and closing,
reopening and deleting the study. Thin: reads
come from `annotation.ui_selectors`, rules from `annotation.services`."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.forms import ExtendPoolForm, VoidJudgmentForm
from annotation.models import Judgment, Study
from annotation.selectors import pool_summary
from annotation.serializers import StudyTrainingRequestSerializer
from annotation.services import void_judgment
from annotation.services.lifecycle import close_study, delete_study, reopen_study
from annotation.services.pools import extend_pool
from annotation.ui_selectors import staff_studies, staff_study_summary
from console.selectors import annotator_rows, study_facts, study_item_rows
from retrieval import selectors as retrieval_selectors
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.serializers import request_defaults, save_or_errors
from retrieval.wording import counted


@staff_required
def study_list(request):
    return render(request, "console/study_list.html", {"rows": staff_studies()})


DEFAULT_STUDY_TRAINING_REQUEST = request_defaults(StudyTrainingRequestSerializer)


def _study_with_run(study_id: int) -> Study:
    return get_object_or_404(Study.objects.select_related("collection", "negatives_run"), pk=study_id)


def _render_study_detail(
    request,
    study: Study,
    *,
    training_request: dict | None = None,
    training_errors: dict | None = None,
    extend_form: ExtendPoolForm | None = None,
    status: int = 200,
):
    items, item_page = study_item_rows(study, request.GET.get("page", 1))
    pool = pool_summary(study)
    return render(
        request,
        "console/study_detail.html",
        {
            "study": study,
            "overview": staff_study_summary(study),
            "items": items,
            "item_page": item_page,
            "facts": study_facts(study),
            "pool": pool,
            "extend_form": extend_form or (ExtendPoolForm(study=study) if pool else None),
            "annotators": annotator_rows(study),
            "training_request": training_request or DEFAULT_STUDY_TRAINING_REQUEST,
            "training_errors": training_errors or {},
            "continuable_retrievers": retrieval_selectors.continuable_retrievers(),
            "default_model": retrieval_selectors.default_dense_model_label(),
        },
        status=status,
    )


@staff_required
def study_detail(request, study_id: int):
    return _render_study_detail(request, _study_with_run(study_id))


@staff_required
@require_POST
def study_train(request, study_id: int):
    """Queue a training on the study's judgments, then show it among the dashboard's jobs
    (post/redirect/get); invalid input re-renders the study page with the errors in its form."""
    study = _study_with_run(study_id)
    job, errors = save_or_errors(
        StudyTrainingRequestSerializer(data=request.POST, context={"study": study, "user": request.user})
    )
    if job is None:
        return _render_study_detail(
            request,
            study,
            status=400,
            training_errors=errors,
            training_request={**DEFAULT_STUDY_TRAINING_REQUEST, **request.POST.dict()},
        )
    messages.success(
        request,
        f"Training of “{job.parameters['name']}” on {job.parameters['pairs']} pairs from the "
        f"judgments of “{study.name}” queued as job {job.pk} on the {job.queue} queue.",
    )
    return redirect(reverse("dashboard") + "#jobs")


@staff_required
@require_POST
def study_extend(request, study_id: int):
    """Add runs to the study's pool (post/redirect/get); refusals re-render the page with the
    form showing them."""
    study = _study_with_run(study_id)
    if not hasattr(study, "pool"):
        raise Http404("this study has no pool")
    form = ExtendPoolForm(request.POST, study=study)
    if form.is_valid():
        try:
            extension = extend_pool(study, **form.cleaned_data)
        except InputError as error:
            form.add_service_error(error)
        else:
            messages.success(
                request,
                f"{counted(len(extension.runs), 'run')} added: {counted(extension.pairs_added, 'new pair')}, "
                f"{counted(extension.pairs_already_pooled, 'pair')} already pooled, "
                f"{counted(extension.items_added, 'item')} to judge; every judgment made stays.",
            )
            return redirect(reverse("study_detail", args=[study.pk]) + "#pool")
    return _render_study_detail(request, study, extend_form=form, status=400)


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


@staff_required
@require_POST
def study_close(request, study_id: int):
    study = close_study(get_object_or_404(Study, pk=study_id))
    messages.success(request, f"Study “{study.name}” is closed: annotators get no more work; answers given stay.")
    return redirect("study_detail", study_id=study.pk)


@staff_required
@require_POST
def study_reopen(request, study_id: int):
    study = reopen_study(get_object_or_404(Study, pk=study_id))
    messages.success(request, f"Study “{study.name}” is open for annotation again.")
    return redirect("study_detail", study_id=study.pk)


@staff_required
@require_POST
def study_delete(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    try:
        summary = delete_study(study, confirm_name=request.POST.get("confirm", ""))
    except InputError as error:
        messages.error(request, f"Not deleted: {error.message}.")
        return redirect(reverse("study_detail", args=[study.pk]) + "#manage")
    messages.success(
        request,
        f"Study “{summary['study']}” deleted with {counted(summary['items'], 'item')}"
        f" and {counted(summary['judgments'], 'judgment')}.",
    )
    return redirect("study_list")
