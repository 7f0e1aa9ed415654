"""Request and response shapes of the annotation API. Validation of rules lives in the services;
these only check types and shapes."""
from django.contrib.auth import get_user_model
from rest_framework import serializers

from retrieval.models import Collection, Document, Run

from .models import Study
from .services.studies import MAX_CANDIDATES, MIN_CANDIDATES


class StudySerializer(serializers.ModelSerializer):
    """Staff view of a study, with its progress counts (`overview`, filled in by the view)."""

    collection = serializers.SlugRelatedField(slug_field="name", read_only=True)
    annotators = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Study
        fields = [
            "id", "name", "kind", "status", "collection", "negatives_run", "seed", "candidates_per_item",
            "judgments_per_item", "context_left", "context_right", "guidelines", "claim_minutes", "annotators",
            "parameters", "created_by", "created_at",
        ]
        read_only_fields = fields


class StudyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=[Study.Kind.PROXY.value], default=Study.Kind.PROXY.value)
    collection = serializers.SlugRelatedField(slug_field="name", queryset=Collection.objects.all())
    negatives_run = serializers.PrimaryKeyRelatedField(queryset=Run.objects.all())
    items = serializers.IntegerField(min_value=1)
    candidates = serializers.IntegerField(min_value=MIN_CANDIDATES, max_value=MAX_CANDIDATES, default=3)
    judgments_per_item = serializers.IntegerField(min_value=1, default=3)
    seed = serializers.IntegerField(default=0)
    context_left = serializers.IntegerField(min_value=0, default=4)
    context_right = serializers.IntegerField(min_value=0, default=4)
    single_sentence = serializers.BooleanField(default=False)
    book = serializers.PrimaryKeyRelatedField(queryset=Document.objects.all(), required=False, allow_null=True)
    guidelines = serializers.CharField(allow_blank=True, default="")
    annotators = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False
    )
    claim_minutes = serializers.IntegerField(min_value=1, default=30)


class SubmitSerializer(serializers.Serializer):
    """An answer: the opaque candidate id from the item payload, or its 0-based position."""

    item = serializers.IntegerField()
    candidate = serializers.IntegerField(required=False)
    position = serializers.IntegerField(required=False, min_value=0)
    label = serializers.JSONField(required=False)
    seconds = serializers.FloatField(required=False, allow_null=True)

    def validate(self, attrs):
        if not {"candidate", "position", "label"} & attrs.keys():
            raise serializers.ValidationError("give the chosen candidate (or its position), or a label")
        return attrs


class VoidSerializer(serializers.Serializer):
    reason = serializers.CharField()
