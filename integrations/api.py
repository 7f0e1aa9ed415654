"""Staff REST routes for recruiting (invitations, a study's named annotators and cap, its crowd
link and participants) and webhooks (registration and the delivery log). Everything here is
staff-only (IsAdminUser): annotators and crowd participants get 403."""

from django.conf import settings
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from marginalia.public_address import public_address
from marginalia.throttling import SharedScopedRateThrottle

from .models import CrowdLink, Invitation, Webhook
from .selectors import delivery_row, invitation_row, participant_rows, webhook_row
from .serializers import (
    CrowdLinkSerializer,
    InvitationCreateSerializer,
    RecruitingSerializer,
    ScreenOutSerializer,
    WebhookChangeSerializer,
    WebhookSerializer,
)
from .services.crowd import completion_url, configure_crowd_link, screen_out, study_url
from .services.invitations import invite_annotator
from .services.recruiting import grant_access, granted_accounts, set_only_granted, set_recruiting
from .services.webhooks import register_webhook, set_webhook_active

# A JSON array of objects, for the schema (several endpoints answer with plain rows).
ROWS = build_array_type(build_basic_type(OpenApiTypes.OBJECT))


class TokenView(ObtainAuthToken):
    """POST `{username, password}` → `{token}`: the API token of an active account (created on
    first use), for scripts and the Python client. Throttled per client address (scope "token",
    MARGINALIA_TOKEN_RATE, counted once for all web processes): a 429 carries Retry-After; wrong
    passwords count towards the sign-in lockout (django-axes). A token past MARGINALIA_TOKEN_DAYS
    is replaced by a new one; a password change revokes it (integrations.identity). Crowd
    participants have no password, so they never get one."""

    throttle_classes = [SharedScopedRateThrottle]
    throttle_scope = "token"

    def post(self, request, *args, **kwargs):
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response({"token": current_token(form.validated_data["user"]).key})


def current_token(user) -> Token:
    """The user's token, replaced by a fresh one when it is older than TOKEN_MAX_AGE (an expired
    token is refused by marginalia.authentication.ExpiringTokenAuthentication)."""
    token, _ = Token.objects.get_or_create(user=user)
    if token.created < timezone.now() - settings.TOKEN_MAX_AGE:
        token.delete()
        token = Token.objects.create(user=user)
    return token


class StaffAPIView(APIView):
    permission_classes = [permissions.IsAdminUser]


class InvitationsView(StaffAPIView):
    """GET: invitations (never their links: only digests are stored). POST: a new one; the
    response carries the one-time `url`, the only time it is shown."""

    @extend_schema(operation_id="invitations_list", responses={200: ROWS})
    def get(self, request):
        return Response([invitation_row(i) for i in Invitation.objects.select_related("accepted_by")[:500]])

    @extend_schema(request=InvitationCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        form = InvitationCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        base_url = public_address(request)
        issued = invite_annotator(**form.validated_data, created_by=request.user, base_url=base_url)
        body = {**invitation_row(issued.invitation), "url": issued.url(base_url)}
        return Response(body, status=status.HTTP_201_CREATED)


def _recruiting(study: Study) -> dict:
    return {
        "study": study.pk,
        "annotators": sorted(study.annotators.values_list("username", flat=True)),
        "max_items_per_annotator": study.max_items_per_annotator,
        "granted": granted_accounts(study),
    }


class RecruitingView(StaffAPIView):
    """A study's named annotators (empty: everyone), per-annotator cap (null: none) and the
    accounts it was granted to (invitations, staff): PATCH names, caps (a cap below what someone
    has judged needs `confirm_below_done`), grants access to existing accounts, and widens or
    narrows accounts' scope."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        return Response(_recruiting(get_object_or_404(Study, pk=pk)))

    @extend_schema(request=RecruitingSerializer, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, pk: int):
        study = get_object_or_404(Study, pk=pk)
        form = RecruitingSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        grant, widen, narrow = (data.pop(key, []) for key in ("grant", "widen", "narrow"))
        with transaction.atomic():
            set_recruiting(study, **data)
            grant_access(study, grant)
            set_only_granted(widen, False)
            set_only_granted(narrow, True)
        return Response(_recruiting(study))


def _crowd_link(link: CrowdLink, request) -> dict:
    return {
        "study": link.study_id,
        "url": study_url(link, public_address(request)),
        "completion_code": link.completion_code,
        "completion_url": completion_url(link),
        "screened_out_code": link.screened_out_code,
        "quota": link.quota,
        "active": link.active,
    }


class CrowdLinkView(StaffAPIView):
    """GET: the study's crowd link (404 before one is made). PUT: make or change it."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        return Response(_crowd_link(get_object_or_404(CrowdLink, study_id=pk), request))

    @extend_schema(request=CrowdLinkSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, pk: int):
        study = get_object_or_404(Study, pk=pk)
        form = CrowdLinkSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response(_crowd_link(configure_crowd_link(study, **form.validated_data), request))


class ParticipantsView(StaffAPIView):
    @extend_schema(responses={200: ROWS})
    def get(self, request, pk: int):
        return Response(participant_rows(get_object_or_404(CrowdLink, study_id=pk)))


class ScreenOutView(StaffAPIView):
    @extend_schema(request=ScreenOutSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, pk: int, participant: str):
        link = get_object_or_404(CrowdLink, study_id=pk)
        form = ScreenOutSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        screened = screen_out(link, participant, by=request.user, reason=form.validated_data["reason"])
        body = {"name": screened.user.username, "participant": screened.external_id, "status": screened.status}
        return Response(body)


class WebhooksView(StaffAPIView):
    """GET: every webhook (its secret's hint, never the secret). POST `{url, events, study,
    secret}`: register one (odd URLs and private addresses refused) → 201 with the secret, the
    only time it is shown."""

    @extend_schema(operation_id="webhooks_list", responses={200: ROWS})
    def get(self, request):
        return Response([webhook_row(hook) for hook in Webhook.objects.all()])

    @extend_schema(request=WebhookSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        form = WebhookSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        hook, secret = register_webhook(**form.validated_data, created_by=request.user)
        return Response({**webhook_row(hook), "secret": secret}, status=status.HTTP_201_CREATED)


class WebhookDetailView(StaffAPIView):
    """GET one webhook; PATCH `{active}` pauses (its queued deliveries end failed) or resumes
    it; DELETE removes it and its log."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk: int):
        return Response(webhook_row(get_object_or_404(Webhook, pk=pk)))

    @extend_schema(request=WebhookChangeSerializer, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, pk: int):
        hook = get_object_or_404(Webhook, pk=pk)
        form = WebhookChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response(webhook_row(set_webhook_active(hook, form.validated_data["active"])))

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int):
        get_object_or_404(Webhook, pk=pk).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveriesView(StaffAPIView):
    """The delivery log of one webhook, newest first: status, attempts, last status code and
    error, and every attempt."""

    @extend_schema(responses={200: ROWS})
    def get(self, request, pk: int):
        hook = get_object_or_404(Webhook, pk=pk)
        return Response([delivery_row(d) for d in hook.deliveries.order_by("-pk")[:500]])
