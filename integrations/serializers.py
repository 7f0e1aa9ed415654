"""Request shapes of the integrations API; the rules are in integrations.services."""

from django.contrib.auth import get_user_model
from rest_framework import serializers

from annotation.models import Study


class InvitationCreateSerializer(serializers.Serializer):
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    studies = serializers.PrimaryKeyRelatedField(queryset=Study.objects.all(), many=True)
    send = serializers.BooleanField(default=True, help_text="E-mail the link when an address is given.")


class RecruitingSerializer(serializers.Serializer):
    annotators = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False
    )
    max_items_per_annotator = serializers.IntegerField(min_value=1, allow_null=True, required=False)


class CrowdLinkSerializer(serializers.Serializer):
    completion_code = serializers.CharField(max_length=64, required=False)
    completion_url = serializers.URLField(required=False, allow_blank=True)
    screened_out_code = serializers.CharField(max_length=64, required=False, allow_blank=True)
    quota = serializers.IntegerField(min_value=1, allow_null=True, required=False)
    active = serializers.BooleanField(required=False)


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
