"""REST shape of a job: what clients poll."""

from rest_framework import serializers

from jobs.models import Job


class JobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    is_finished = serializers.BooleanField(read_only=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "queue",
            "status",
            "progress",
            "message",
            "error",
            "parameters",
            "result",
            "cancel_requested",
            "is_finished",
            "created_by",
            "created_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
        ]
