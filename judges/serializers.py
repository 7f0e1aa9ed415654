"""REST shapes for judges (staff only). A judge's settings show the NAME of the judge secret
that holds its key, never a key; a judge secret's value is write-only."""

from rest_framework import serializers

from jobs.serializers import JobSerializer
from retrieval.fields import AsciiFloatField, AsciiIntegerField

from .models import Judge
from .services import MAX_SAMPLES, get_judge, register_judge, start_judging


class JudgeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Judge
        fields = ["id", "name", "version", "backend", "settings", "queue", "created_at"]
        read_only_fields = ["id", "version", "queue", "created_at"]

    def create(self, validated_data):
        return register_judge(
            validated_data["name"], validated_data["backend"], validated_data.get("settings"), self.context.get("user")
        )


class JudgingRequestSerializer(serializers.Serializer):
    """POST /api/studies/ID/judge/: which judge (name; default the embedded one) and how many samples."""

    judge = serializers.CharField(required=False, allow_blank=True, default="")
    samples = AsciiIntegerField(required=False, default=1, min_value=1, max_value=MAX_SAMPLES)

    def create(self, validated_data):
        judge = get_judge(validated_data["judge"] or None)
        return start_judging(self.context["study"], judge, validated_data["samples"], self.context.get("user"))

    def to_representation(self, job):
        return {"job": JobSerializer(job).data}


class JudgeSecretSerializer(serializers.Serializer):
    """POST /api/judge-secrets/: the value is taken, never given back (judges.secrets checks both)."""

    name = serializers.CharField(max_length=64)
    value = serializers.CharField(write_only=True, trim_whitespace=False, style={"input_type": "password"})


class JudgeSecretChangeSerializer(serializers.Serializer):
    value = serializers.CharField(write_only=True, trim_whitespace=False, style={"input_type": "password"})


class PostEditingRequestSerializer(serializers.Serializer):
    """POST /api/studies/ID/post-editing/: whose proposals (a judge's name; default the embedded
    one), on which share of the formal items (0 < share <= 1), drawn with which seed."""

    judge = serializers.CharField(required=False, allow_blank=True, default="")
    share = AsciiFloatField(required=False, default=1.0, min_value=0.0, max_value=1.0)
    seed = AsciiIntegerField(required=False, default=0, min_value=0, max_value=2**31 - 1)
