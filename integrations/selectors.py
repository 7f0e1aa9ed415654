"""What the integration pages and API read back."""

from django.contrib.auth import get_user_model

from annotation.models import Study
from marginalia.public_address import public_address

from .forms import AnnotatorsForm, CrowdLinkForm, GrantForm, InviteForm, ScreenOutForm
from .models import CrowdLink, Invitation, Participant, Webhook, WebhookDelivery
from .services.crowd import study_url
from .services.recruiting import formal_judgment_counts, granted_accounts, workers


def participant_rows(link: CrowdLink) -> list[dict]:
    """Each participant of a link by name ("Participant-N"), with their platform id for staff
    who screen someone out, and how many formal items they judged (what the quota counts)."""
    participants = list(link.participants.select_related("user"))
    judged = formal_judgment_counts(link.study, [p.user for p in participants])
    return [
        {
            "name": p.user.username,
            "participant": p.external_id,
            "platform_study": p.platform_study,
            "status": p.status,
            "judged": judged.get(p.user.username, 0),
            "created_at": p.created_at,
            "completed_at": p.completed_at,
        }
        for p in participants
    ]


def invitation_row(invitation: Invitation) -> dict:
    return {
        "id": invitation.pk,
        "email": invitation.email,
        "only_invited_studies": invitation.only_invited_studies,
        "studies": sorted(invitation.studies.values_list("pk", flat=True)),
        "created_at": invitation.created_at,
        "expires_at": invitation.expires_at,
        "emailed": invitation.emailed_at is not None,
        "accepted_by": invitation.accepted_by.username if invitation.accepted_by else None,
    }


def recruiting_page(study: Study, request) -> dict:
    link = CrowdLink.objects.filter(study=study).first()
    return {
        "study": study,
        "annotators": study.annotators.order_by("username"),
        "annotators_form": AnnotatorsForm(
            initial={"annotators": study.annotators.all(), "max_items_per_annotator": study.max_items_per_annotator}
        ),
        # Who has worked here and would be refused if staff named others (the page warns).
        "workers": workers(study),
        "candidates": get_user_model().objects.filter(is_active=True, participant__isnull=True).count(),
        "granted": granted_accounts(study),
        "grant_form": GrantForm(),
        "invite_form": InviteForm(),
        "new_invitation_url": request.session.pop("new_invitation_url", None),
        "invitations": [invitation_row(i) for i in study.invitations.select_related("accepted_by")],
        "link": link,
        "link_url": study_url(link, public_address(request)) if link else None,
        "crowd_form": CrowdLinkForm(
            initial={
                "completion_code": link.completion_code if link else "",
                "completion_url": link.completion_url if link else "",
                "screened_out_code": link.screened_out_code if link else "",
                "quota": link.quota if link else None,
                "active": link.active if link else True,
            }
        ),
        "screen_out_form": ScreenOutForm(),
        "participants": participant_rows(link) if link else [],
        "participant_statuses": Participant.Status,
    }


def webhook_row(hook: Webhook) -> dict:
    return {
        "id": hook.pk,
        "url": hook.url,
        "events": hook.events,
        "study": hook.study_id,
        "secret_hint": hook.secret_hint,
        "active": hook.active,
        "created_at": hook.created_at,
    }


def delivery_row(delivery: WebhookDelivery) -> dict:
    return {
        "id": delivery.pk,
        "delivery_id": str(delivery.delivery_id),
        "event": delivery.event,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "log": delivery.log,
        "created_at": delivery.created_at,
        "delivered_at": delivery.delivered_at,
        "next_attempt_at": delivery.next_attempt_at,
    }
