"""Integration pages: accepting an invitation, the crowd entry link (with its confirmation
step) and completion page, and the staff recruiting page of a study. Thin: the rules live in
integrations.services."""

from __future__ import annotations

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotation.models import Study
from annotation.views import FINISHED_REDIRECTS_SESSION_KEY
from marginalia.public_address import public_address
from retrieval.access import staff_required
from retrieval.errors import InputError

from .forms import AnnotatorsForm, CrowdLinkForm, GrantForm, InviteForm, ScopeForm, ScreenOutForm
from .models import CrowdLink, Participant
from .selectors import recruiting_page
from .services.crowd import (
    CrowdRefusal,
    CrowdThrottled,
    admit,
    complete,
    completion_url,
    configure_crowd_link,
    read_entry,
    screen_out,
)
from .services.invitations import accept_invitation, invite_annotator, open_invitation
from .services.recruiting import grant_access, locked_out_by, set_only_granted, set_recruiting

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


@require_http_methods(["GET", "POST"])
def crowd_entry(request, slug: str):
    """A crowd platform's link: create or resume the participant it names, sign them in and send
    them to the study (and, once done, to their completion code). A visit that would replace
    someone else's signed-in session (staff, another participant) first asks, on a page whose
    button POSTs back here with its CSRF token: a link followed from another site cannot sign
    anyone out."""
    link = get_object_or_404(CrowdLink.objects.select_related("study"), slug=slug)
    try:
        entry = read_entry(link, request.GET)
        someone_else = request.user.is_authenticated and (
            entry.participant is None or entry.participant.user_id != request.user.pk
        )
        if someone_else and request.method != "POST":
            return render(
                request,
                "integrations/crowd_confirm.html",
                {"study": link.study, "signed_in_as": request.user.get_username(), "action": request.get_full_path()},
            )
        participant = admit(entry, address=get_client_ip_address(request) or "")
    except InputError as error:
        return render(
            request, "integrations/crowd_refused.html", {"study": link.study, "reason": error.for_people()}, status=400
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
    response = render(request, "integrations/crowd_refused.html", context, status=refusal.status)
    if isinstance(refusal, CrowdThrottled):
        response["Retry-After"] = str(refusal.retry_after)
    return response


@staff_required
def study_recruiting(request, study_id: int):
    """Staff: named annotators and the per-annotator cap, invitations, the crowd link and its
    participants. POSTs go to the action routes below and come back here."""
    study = get_object_or_404(Study, pk=study_id)
    return render(request, "integrations/recruiting.html", recruiting_page(study, request))


def _back(study_id: int, anchor: str):
    return redirect(reverse("study_recruiting", args=[study_id]) + f"#{anchor}")


def _apply(request, form, study_id: int, anchor: str, action) -> HttpResponse:
    """Every recruiting form's one shape: a valid form runs `action(cleaned_data)`, which returns
    the success message; a form error or the service's refusal shows as one line; back to the
    page's section either way."""
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
    else:
        try:
            messages.success(request, action(form.cleaned_data))
        except InputError as error:
            messages.error(request, error.for_people())
    return _back(study_id, anchor)


@staff_required
@require_POST
def recruiting_invite(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)

    def invite(data) -> str:
        base_url = public_address(request)
        issued = invite_annotator(
            studies=[study],
            email=data["email"],
            created_by=request.user,
            base_url=base_url,
            only_invited_studies=data["only_invited_studies"],
        )
        request.session["new_invitation_url"] = issued.url(base_url)
        sent = f" and e-mailed to {issued.invitation.email}" if issued.invitation.emailed_at else ""
        return f"Invitation created{sent}. The one-time link is shown once, below."

    return _apply(request, InviteForm(request.POST), study.pk, "invitations", invite)


@staff_required
@require_POST
def recruiting_annotators(request, study_id: int):
    """Name the study's annotators and set its cap; the message says whom naming now refuses."""
    study = get_object_or_404(Study, pk=study_id)

    def save(data) -> str:
        named = list(data["annotators"])
        locked_out = locked_out_by(study, named)
        set_recruiting(
            study,
            annotators=named,
            max_items_per_annotator=data["max_items_per_annotator"],
            confirm_below_done=data["confirm_below_done"],
        )
        if not named:
            return "Saved: every annotator may work on the study."
        names = ", ".join(user.username for user in named)
        saved = f"Saved: only {names} and the accounts granted the study may work on it."
        if locked_out:
            refused = ", ".join(f"{row['username']} ({row['judged']} judged)" for row in locked_out)
            saved += f" Refused from now on: {refused}."
        return saved

    return _apply(request, AnnotatorsForm(request.POST), study.pk, "annotators", save)


@staff_required
@require_POST
def recruiting_grant(request, study_id: int):
    """Give an existing account access to the study without naming it (the study stays open)."""
    study = get_object_or_404(Study, pk=study_id)

    def grant(data) -> str:
        grant_access(study, [data["username"]])
        return f"{data['username']} may now work on this study."

    return _apply(request, GrantForm(request.POST), study.pk, "granted", grant)


@staff_required
@require_POST
def recruiting_scope(request, study_id: int):
    """Widen an account granted the study to every open study, or scope it back to its grants."""
    study = get_object_or_404(Study, pk=study_id)

    def scope(data) -> str:
        set_only_granted([data["username"]], data["only_granted"])
        where = "its granted studies only" if data["only_granted"] else "every open study"
        return f"{data['username']} now works on {where}."

    return _apply(request, ScopeForm(request.POST), study.pk, "granted", scope)


@staff_required
@require_POST
def recruiting_crowd(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    form = CrowdLinkForm(request.POST)

    def save(data) -> str:
        configure_crowd_link(study, **form.service_arguments())
        return "Crowd link saved."

    return _apply(request, form, study.pk, "crowd", save)


@staff_required
@require_POST
def recruiting_screen_out(request, study_id: int):
    link = get_object_or_404(CrowdLink, study_id=study_id)

    def screen(data) -> str:
        screened = screen_out(link, data["participant"], by=request.user, reason=data["reason"])
        return f"{screened.user.username} screened out."

    return _apply(request, ScreenOutForm(request.POST), study_id, "crowd", screen)
