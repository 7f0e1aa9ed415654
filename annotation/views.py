"""The annotation web pages: the annotator's home, annotation page (every kind, qualification
round included) and peer-review page, and the staff pages to create studies of every kind,
watch annotators' quality, block them and adjudicate (the study list and study page live in
console/). Thin: every
rule lives in `annotation.services`, every read in `annotation.selectors` /
`annotation.ui_selectors`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.wording import counted

from .forms import (
    AdjudicationForm,
    BlockForm,
    DesignateForm,
    ItemActionForm,
    JudgmentForm,
    PeerVerdictForm,
    PreferenceStudyForm,
    ProxyStudyForm,
    QuotabilityStudyForm,
    RelevanceStudyForm,
)
from .models import AnnotatorFlag, Item, PeerReview, Study
from .services import (
    AnnotationForbidden,
    SubmissionRejected,
    create_preference_study,
    create_proxy_study,
    create_quotability_study,
    create_relevance_study,
    next_work,
    submit_judgment,
)
from .services.annotator_actions import flag_item, skip_item, undo_last_submission, undoable_submission
from .services.presentation import create_with_presentation
from .services.quality import (
    adjudicate,
    block_annotator,
    designate_items,
    next_peer_review,
    quality_measures,
    refresh_flags,
    resolve_flag,
    sample_for_peer_review,
    submit_peer_review,
    unblock_annotator,
)
from .services.quality_settings import create_with_quality
from .ui_selectors import (
    adjudication_rows,
    annotation_page,
    annotator_studies,
    peer_review_page,
    qualification_checkpoint,
    qualification_outcome,
    quality_page,
)

# Where an annotator goes once nothing is left for them in a study, set in their session by
# whatever sent them there (the crowd entry link sends participants on to their completion
# code); study id (as text) → URL. Annotation itself knows nothing about the sender.
FINISHED_REDIRECTS_SESSION_KEY = "annotation_finished_redirects"


@login_required
def home(request):
    return render(request, "annotation/home.html", {"studies": annotator_studies(request.user)})


@login_required
def annotate(request, study_id: int):
    """GET: the annotator's current item (their live claim again, else a new one, or their next
    qualification question), the result of a failed qualification attempt that may be retried,
    or the end of the study. POST: store the answer, then show what comes next
    (post/redirect/get)."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        if request.method == "POST":
            _submit(request, study)
            return redirect("annotate", study_id=study.pk)
        checkpoint = qualification_checkpoint(study, request.user)
        if checkpoint is not None:
            return render(request, "annotation/qualification_result.html", {"study": study, "result": checkpoint})
        work = next_work(study, request.user)
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    finished_redirect = request.session.get(FINISHED_REDIRECTS_SESSION_KEY, {}).get(str(study.pk))
    # An adaptive preference study with pairs still to come is not finished for a crowd participant.
    if work["finished"] and finished_redirect and not work.get("more_coming"):
        return redirect(finished_redirect)
    undoable = undoable_submission(study, request.user)
    return render(
        request,
        "annotation/annotate.html",
        {"study": study, "work": annotation_page(work, study), "undo": undoable.payload() if undoable else None},
    )


def _posted_item(request, study: Study) -> tuple[ItemActionForm, Item | None]:
    """The skip or flag form posted, and the study's item it names (None when it names none)."""
    form = ItemActionForm(request.POST)
    if not form.is_valid():
        return form, None
    return form, Item.objects.filter(study=study, pk=form.cleaned_data["item"]).select_related("study").first()


def _annotator_action(request, study: Study, verb: str, act: Callable[[], tuple[int, str]]):
    """Do what an annotator asked from the page (skip, flag, undo) and go back to it: `act`
    returns the outcome's message level and text; a rejected action says why it was not done,
    a refusal of the study itself shows the refused page."""
    try:
        level, message = act()
        messages.add_message(request, level, message)
    except SubmissionRejected as rejection:
        messages.error(request, f"Not {verb}: {rejection}.")
    except InputError as error:
        messages.error(request, f"Not {verb}: {error.message}.")
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    return redirect("annotate", study_id=study.pk)


def _not_in_study(request, study: Study):
    messages.error(request, "That item is not part of this study.")
    return redirect("annotate", study_id=study.pk)


@login_required
@require_POST
def item_skip(request, study_id: int):
    """Pass the item shown over: it goes back to the queue for others, never to this annotator."""
    study = get_object_or_404(Study, pk=study_id)
    _form, item = _posted_item(request, study)
    if item is None:
        return _not_in_study(request, study)

    def skip() -> tuple[int, str]:
        skip_item(item, request.user)
        return messages.INFO, "Item skipped: it goes to someone else."

    return _annotator_action(request, study, "skipped", skip)


@login_required
@require_POST
def item_flag(request, study_id: int):
    """Report the item shown as broken; staff see the reason. The item stays on the page."""
    study = get_object_or_404(Study, pk=study_id)
    form, item = _posted_item(request, study)
    if item is None:
        return _not_in_study(request, study)

    def flag() -> tuple[int, str]:
        flagging = flag_item(item, request.user, form.cleaned_data["reason"])
        sent = "Flag sent to the study's staff." if flagging.created else "You had already flagged this item."
        return messages.SUCCESS, sent

    return _annotator_action(request, study, "flagged", flag)


@login_required
@require_POST
def submission_undo(request, study_id: int):
    """Take back the last answer within the grace period; its item is shown again."""
    study = get_object_or_404(Study, pk=study_id)

    def undo() -> tuple[int, str]:
        undo_last_submission(study, request.user)
        return messages.INFO, "Your last answer was taken back: answer this item again."

    return _annotator_action(request, study, "undone", undo)


@login_required
@require_POST
def qualification_retry(request, study_id: int):
    """Start the annotator's next qualification attempt (asking for work opens it)."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        next_work(study, request.user)
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    return redirect("annotate", study_id=study.pk)


def _refused(request, study: Study, refusal: AnnotationForbidden):
    return render(request, "annotation/refused.html", {"study": study, "reason": str(refusal)}, status=403)


def _submit(request, study: Study) -> None:
    form = JudgmentForm(
        request.POST, proxy=study.kind == Study.Kind.PROXY, preference=study.kind == Study.Kind.PREFERENCE
    )
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
            annotator=request.user,
            item=item,
            seconds=form.cleaned_data["seconds"] or None,
            **form.answer(),
        )
    except (SubmissionRejected, InputError) as rejection:
        messages.error(request, f"Your answer was not stored: {rejection}.")
        return
    if not submission.created:
        messages.info(request, "You had already answered that item; your first answer stands.")
    outcome = qualification_outcome(submission)
    if outcome is not None:
        messages.add_message(request, messages.SUCCESS if outcome["passed"] else messages.WARNING, outcome["message"])


STUDY_KINDS = {
    Study.Kind.PROXY: (ProxyStudyForm, create_proxy_study),
    Study.Kind.RELEVANCE: (RelevanceStudyForm, create_relevance_study),
    Study.Kind.QUOTABILITY: (QuotabilityStudyForm, create_quotability_study),
    Study.Kind.PREFERENCE: (PreferenceStudyForm, create_preference_study),
}


@staff_required
def study_create(request, kind: str = Study.Kind.PROXY):
    """The form of one study kind; its settings go to that kind's create service, and the
    quality-control and presentation settings with them (one transaction, see
    create_with_quality and create_with_presentation)."""
    if kind not in STUDY_KINDS:
        raise Http404(f"no study kind {kind!r}")
    form_class, create = STUDY_KINDS[kind]
    form = form_class(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            creation = create_with_quality(
                partial(create_with_presentation, create, presentation=form.presentation_settings()),
                quality=form.quality_settings(),
                qualification_questions=form.question_count(),
                **form.study_settings(),
                created_by=request.user,
            )
        except InputError as error:
            form.add_service_error(error)
        else:
            skipped = f"; {counted(len(creation.skipped), 'query')} skipped" if creation.skipped else ""
            messages.success(
                request, f"Study “{creation.study.name}” created with {counted(creation.items, 'item')}{skipped}."
            )
            return redirect("study_detail", study_id=creation.study.pk)
    return render(request, "annotation/study_form.html", {"form": form, "kind": Study.Kind(kind)})


# --- quality control: staff --------------------------------------------------------------------


@staff_required
def study_quality(request, study_id: int):
    """Per-annotator quality (gold accuracy, speed, peer pass rate, flags) with the actions staff
    take on it. Looking refreshes the automatic flags first."""
    study = get_object_or_404(Study, pk=study_id)
    measures = quality_measures(study)
    refresh_flags(study, measures=measures)
    return render(
        request,
        "annotation/study_quality.html",
        {
            "study": study,
            "quality": quality_page(study, measures),
            "designate_form": DesignateForm(),
        },
    )


def _quality_url(study_id: int, anchor: str = "") -> str:
    return reverse("study_quality", args=[study_id]) + (f"#{anchor}" if anchor else "")


@staff_required
@require_POST
def annotator_block(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    form = BlockForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not blocked: " + " ".join(e for errors in form.errors.values() for e in errors))
        return redirect(_quality_url(study.pk))
    annotator = get_object_or_404(get_user_model(), username=form.cleaned_data["annotator"])
    try:
        block_annotator(
            study,
            annotator,
            by=request.user,
            reason=form.cleaned_data["reason"],
            exclude_judgments=form.cleaned_data["exclude_judgments"],
        )
    except InputError as error:
        messages.error(request, f"{annotator.username} was not blocked: {error.message}.")
    else:
        excluded = " Their judgments are left out of the statistics." if form.cleaned_data["exclude_judgments"] else ""
        messages.success(request, f"{annotator.username} is blocked from this study.{excluded}")
    return redirect(_quality_url(study.pk, f"annotator-{annotator.username}"))


@staff_required
@require_POST
def annotator_unblock(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    annotator = get_object_or_404(get_user_model(), username=request.POST.get("annotator", ""))
    if unblock_annotator(study, annotator):
        messages.success(request, f"{annotator.username} may work on this study again; their judgments count again.")
    else:
        messages.info(request, f"{annotator.username} was not blocked from this study.")
    return redirect(_quality_url(study.pk, f"annotator-{annotator.username}"))


@staff_required
@require_POST
def flag_resolve(request, study_id: int, flag_id: int):
    flag = get_object_or_404(AnnotatorFlag, pk=flag_id, study_id=study_id)
    resolve_flag(flag, by=request.user)
    messages.success(request, f"Flag on {flag.annotator.username} resolved.")
    return redirect(_quality_url(study_id, f"annotator-{flag.annotator.username}"))


@staff_required
@require_POST
def peer_review_sample(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    try:
        result = sample_for_peer_review(study)
    except InputError as error:
        messages.error(request, f"No judgments sampled: {error.message}.")
    else:
        unassigned = f"; {result['unassigned']} found no eligible reviewer" if result["unassigned"] else ""
        messages.success(request, f"{result['assigned']} judgments sent to peer review{unassigned}.")
    return redirect(_quality_url(study.pk))


@staff_required
@require_POST
def items_designate(request, study_id: int):
    """Draw hidden gold or qualification items among the unjudged items with a known answer."""
    study = get_object_or_404(Study, pk=study_id)
    form = DesignateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing designated: " + " ".join(e for errors in form.errors.values() for e in errors))
        return redirect(_quality_url(study.pk))
    role = form.cleaned_data["role"]
    try:
        chosen = designate_items(study, role, count=form.cleaned_data["count"])
    except InputError as error:
        messages.error(request, f"Nothing designated: {error.message}.")
    else:
        messages.success(request, f"{len(chosen)} items are now {role} items.")
    return redirect(_quality_url(study.pk))


@staff_required
def study_adjudicate(request, study_id: int):
    """The items whose annotators disagree, every answer given, and staff's decision."""
    study = get_object_or_404(Study, pk=study_id)
    rows, page = adjudication_rows(study, request.GET.get("page", 1))
    return render(request, "annotation/study_adjudicate.html", {"study": study, "rows": rows, "page": page})


@staff_required
@require_POST
def item_adjudicate(request, study_id: int, item_id: int):
    study = get_object_or_404(Study, pk=study_id)
    item = get_object_or_404(Item.objects.select_related("study"), pk=item_id, study=study)
    form = AdjudicationForm(request.POST)
    if form.is_valid():
        try:
            adjudicate(item, by=request.user, **form.decision())
        except InputError as error:
            messages.error(request, f"Item {item.position + 1} was not decided: {error.message}.")
        else:
            messages.success(request, f"Item {item.position + 1} decided.")
    else:
        messages.error(request, "Not decided: " + " ".join(e for errors in form.errors.values() for e in errors))
    page = request.POST.get("page", "")
    on_page = f"?page={page}" if page.isdigit() else ""
    return redirect(reverse("study_adjudicate", args=[study.pk]) + f"{on_page}#item-{item.pk}")


# --- quality control: peer reviewers -------------------------------------------------------------


@login_required
def peer_review(request, study_id: int):
    """GET: the reviewer's next judgment to review (the item and the answer, not who gave it).
    POST: record the verdict, then show the next one."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        if request.method == "POST":
            _submit_verdict(request, study)
            return redirect("peer_review", study_id=study.pk)
        payload = next_peer_review(study, request.user)
    except AnnotationForbidden as refusal:
        return _refused(request, study, refusal)
    return render(request, "annotation/peer_review.html", {"study": study, "review": peer_review_page(payload, study)})


def _submit_verdict(request, study: Study) -> None:
    form = PeerVerdictForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose pass or fail before submitting.")
        return
    review = PeerReview.objects.filter(pk=form.cleaned_data["review"], judgment__item__study=study).first()
    if review is None:
        messages.error(request, "That review is not part of this study.")
        return
    try:
        submission = submit_peer_review(
            review, reviewer=request.user, verdict=form.cleaned_data["verdict"], comment=form.cleaned_data["comment"]
        )
    except InputError as error:
        messages.error(request, f"Your verdict was not stored: {error.message}.")
        return
    if not submission.created:
        messages.info(request, "You had already reviewed that answer; your first verdict stands.")
