"""REST shape of a job: what clients poll (read only)."""

from rest_framework import serializers

from jobs.models import Job


class ShardSerializer(serializers.ModelSerializer):
    """One part of a sharded job, as its parent lists it."""

    class Meta:
        model = Job
        fields = ["id", "status", "progress", "message", "error", "attempts", "worker", "heartbeat_at", "finished_at"]
        read_only_fields = fields


class JobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    is_finished = serializers.BooleanField(read_only=True)
    shards = ShardSerializer(source="children", many=True, read_only=True)

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
            "parent",
            "attempts",
            "max_attempts",
            "worker",
            "shards",
        ]
        read_only_fields = fields  # jobs are started by their own routes, never written through this shape
