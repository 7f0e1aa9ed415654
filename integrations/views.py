"""Integration pages: accepting an invitation, the crowd entry link and completion page, and
the staff recruiting page of a study. Thin: the rules live in integrations.services."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.models import Study
from annotation.views import FINISHED_REDIRECTS_SESSION_KEY
from retrieval.access import staff_required
from retrieval.errors import InputError

from .forms import AnnotatorsForm, CrowdLinkForm, InviteForm, ScreenOutForm
from .models import CrowdLink, Participant
from .selectors import recruiting_page
from .services.crowd import CrowdRefusal, complete, completion_url, configure_crowd_link, enter, screen_out
from .services.invitations import accept_invitation, invite_annotator, open_invitation, set_recruiting

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class InvitationForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)


def invitation_accept(request, token: str):
    """The invited annotator chooses a username and password, is signed in and lands on their
    studies. A used or expired link says so (410)."""
    invitation = open_invitation(token)
    if invitation is None:
        return render(request, "integrations/invitation_gone.html", status=410)
    form = InvitationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = accept_invitation(
                token, username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
        except InputError as error:
            form.add_error(None, error.message)
        else:
            login(request, user, backend=MODEL_BACKEND)
            messages.success(request, f"Welcome, {user.username}: your account is ready.")
            return redirect("home")
    studies = invitation.studies.order_by("name")
    return render(request, "integrations/invitation_accept.html", {"form": form, "studies": studies})


def crowd_entry(request, slug: str):
    """A crowd platform's link: create or resume the participant it names, sign them in and send
    them to the study (and, once done, to their completion code)."""
    link = get_object_or_404(CrowdLink.objects.select_related("study"), slug=slug)
    try:
        participant = enter(link, request.GET)
    except InputError as error:
        return render(
            request, "integrations/crowd_refused.html", {"study": link.study, "reason": str(error)}, status=400
        )
    except CrowdRefusal as refusal:
        return _crowd_refused(request, link, refusal)
    login(request, participant.user, backend=MODEL_BACKEND)
    request.session[FINISHED_REDIRECTS_SESSION_KEY] = {str(link.study_id): reverse("crowd_done", args=[slug])}
    if participant.status == Participant.Status.COMPLETED:
        return redirect("crowd_done", slug=slug)
    return redirect("annotate", study_id=link.study_id)


def crowd_done(request, slug: str):
    """The completion code, once the signed-in participant of this link has finished; back to
    the study while they have work left."""
    link = get_object_or_404(CrowdLink.objects.select_related("study"), slug=slug)
    participant = Participant.objects.filter(link=link, user_id=request.user.pk).first()
    if participant is None:
        raise Http404("no participant of this study is signed in")
    if participant.status == Participant.Status.SCREENED_OUT:
        return _crowd_refused(request, link, CrowdRefusal("you were screened out", code=link.screened_out_code))
    if not complete(participant):
        return redirect("annotate", study_id=link.study_id)
    return render(
        request,
        "integrations/crowd_done.html",
        {
            "study": link.study,
            "code": link.completion_code,
            "return_url": completion_url(link),
            "redirect_seconds": settings.MARGINALIA_CROWD_REDIRECT_SECONDS,
        },
    )


def _crowd_refused(request, link: CrowdLink, refusal: CrowdRefusal):
    context = {"study": link.study, "reason": str(refusal), "code": refusal.code}
    return render(request, "integrations/crowd_refused.html", context, status=403)


@staff_required
def study_recruiting(request, study_id: int):
    """Staff: named annotators and the per-annotator cap, invitations, the crowd link and its
    participants. POSTs go to the action routes below and come back here."""
    study = get_object_or_404(Study, pk=study_id)
    return render(request, "integrations/recruiting.html", recruiting_page(study, request))


def _back(study_id: int, anchor: str):
    return redirect(reverse("study_recruiting", args=[study_id]) + f"#{anchor}")


def _report_errors(request, form) -> None:
    for field, errors in form.errors.items():
        messages.error(request, f"{field}: {' '.join(errors)}")


@staff_required
@require_POST
def recruiting_invite(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    form = InviteForm(request.POST)
    if not form.is_valid():
        _report_errors(request, form)
        return _back(study.pk, "invitations")
    try:
        issued = invite_annotator(
            studies=[study],
            email=form.cleaned_data["email"],
            created_by=request.user,
            base_url=request.build_absolute_uri("/"),
        )
    except InputError as error:
        messages.error(request, str(error))
        return _back(study.pk, "invitations")
    request.session["new_invitation_url"] = request.build_absolute_uri(issued.path)
    sent = f" and e-mailed to {issued.invitation.email}" if issued.invitation.emailed_at else ""
    messages.success(request, f"Invitation created{sent}. The one-time link is shown once, below.")
    return _back(study.pk, "invitations")


@staff_required
@require_POST
def recruiting_annotators(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    form = AnnotatorsForm(request.POST)
    if form.is_valid():
        set_recruiting(
            study,
            annotators=form.cleaned_data["annotators"],
            max_items_per_annotator=form.cleaned_data["max_items_per_annotator"],
        )
        messages.success(request, "Annotators and cap saved.")
    else:
        _report_errors(request, form)
    return _back(study.pk, "annotators")


@staff_required
@require_POST
def recruiting_crowd(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    form = CrowdLinkForm(request.POST)
    if form.is_valid():
        try:
            configure_crowd_link(study, **form.service_arguments())
        except InputError as error:
            messages.error(request, str(error))
        else:
            messages.success(request, "Crowd link saved.")
    else:
        _report_errors(request, form)
    return _back(study.pk, "crowd")


@staff_required
@require_POST
def recruiting_screen_out(request, study_id: int):
    link = get_object_or_404(CrowdLink, study_id=study_id)
    form = ScreenOutForm(request.POST)
    if form.is_valid():
        try:
            screen_out(link, form.cleaned_data["participant"], by=request.user, reason=form.cleaned_data["reason"])
        except InputError as error:
            messages.error(request, str(error))
        else:
            messages.success(request, f"{form.cleaned_data['participant']} screened out.")
    else:
        _report_errors(request, form)
    return _back(study_id, "crowd")
