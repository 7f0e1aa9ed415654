"""Request shapes of the integrations API; the rules are in integrations.services."""

from django.contrib.auth import get_user_model
from rest_framework import serializers

from annotation.models import Study
from retrieval.fields import AsciiIntegerField

CONFIRM_HELP = "Set a cap or quota below what someone has already judged (they stop where they are)."


class InvitationCreateSerializer(serializers.Serializer):
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    studies = serializers.PrimaryKeyRelatedField(queryset=Study.objects.all(), many=True)
    send = serializers.BooleanField(default=True, help_text="E-mail the link when an address is given.")
    only_invited_studies = serializers.BooleanField(
        default=True, help_text="The new account works on these studies only (false: every open study too)."
    )


class RecruitingSerializer(serializers.Serializer):
    annotators = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.filter(participant__isnull=True),
        many=True,
        required=False,
        help_text="Names the study's annotators (empty: every annotator); granted accounts keep their access.",
    )
    max_items_per_annotator = AsciiIntegerField(min_value=1, allow_null=True, required=False)
    confirm_below_done = serializers.BooleanField(default=False, help_text=CONFIRM_HELP)
    grant = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        help_text="Usernames of existing accounts given access to this study (nobody else loses any).",
    )
    widen = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        help_text="Usernames whose accounts may work on every open study, not only their granted ones.",
    )
    narrow = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        help_text="Usernames whose accounts go back to their granted studies only.",
    )


class CrowdLinkSerializer(serializers.Serializer):
    completion_code = serializers.CharField(max_length=64, required=False)
    completion_url = serializers.URLField(required=False, allow_blank=True)
    screened_out_code = serializers.CharField(max_length=64, required=False, allow_blank=True)
    quota = AsciiIntegerField(
        min_value=1, allow_null=True, required=False, help_text="Items per participant; separate from the study's cap."
    )
    active = serializers.BooleanField(required=False)
    confirm_below_done = serializers.BooleanField(default=False, help_text=CONFIRM_HELP)


class ScreenOutSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, default="screened out")


class WebhookSerializer(serializers.Serializer):
    """The URL is read by the strict parser in the service (outbound.targets), not DRF's."""

    url = serializers.CharField(max_length=500, trim_whitespace=False)
    events = serializers.ListField(child=serializers.CharField(), required=False, default=list)
    study = serializers.PrimaryKeyRelatedField(queryset=Study.objects.all(), required=False, allow_null=True)
    secret = serializers.CharField(
        max_length=128, required=False, allow_blank=True, default="", write_only=True, trim_whitespace=False
    )


class WebhookChangeSerializer(serializers.Serializer):
    active = serializers.BooleanField()
