"""REST shapes of collections, queries, runs and jobs, and the one validator for starting a run
(the API and the dashboard form both use RunRequestSerializer)."""
from __future__ import annotations

from rest_framework import serializers

from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.errors import InputError
from retrieval.models import Collection, Job, Query, Retriever, Run
from retrieval.selectors import run_metrics
from retrieval.services.runs import DEFAULT_CONTEXT, DEFAULT_DEPTH, get_or_create_retriever, start_run_async


class CollectionSerializer(serializers.ModelSerializer):
    documents = serializers.IntegerField(source="document_count", read_only=True)
    passages = serializers.IntegerField(source="passage_count", read_only=True)
    queries = serializers.IntegerField(source="query_count", read_only=True)
    qrels = serializers.IntegerField(source="qrel_count", read_only=True)
    runs = serializers.IntegerField(source="run_count", read_only=True)

    class Meta:
        model = Collection
        fields = ["id", "name", "kind", "description", "source", "created_at",
                  "documents", "passages", "queries", "qrels", "runs"]


class QuerySerializer(serializers.ModelSerializer):
    class Meta:
        model = Query
        fields = ["id", "collection", "external_id", "text", "left_context", "right_context", "document",
                  "quote_length", "split", "metadata"]


class JobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    is_finished = serializers.BooleanField(read_only=True)

    class Meta:
        model = Job
        fields = ["id", "kind", "queue", "status", "progress", "message", "error", "parameters", "result",
                  "cancel_requested", "is_finished", "created_by", "created_at", "started_at", "heartbeat_at", "finished_at"]


class RetrieverSerializer(serializers.ModelSerializer):
    class Meta:
        model = Retriever
        fields = ["id", "name", "kind", "parameters", "model_path", "query_model_path"]


class RunSerializer(serializers.ModelSerializer):
    retriever = RetrieverSerializer(read_only=True)
    collection_name = serializers.CharField(source="collection.name", read_only=True)
    job_status = serializers.CharField(source="job.status", read_only=True, default=None)

    class Meta:
        model = Run
        fields = ["id", "collection", "collection_name", "retriever", "parameters", "status", "seconds",
                  "job", "job_status", "tag", "created_at"]


class RunDetailSerializer(RunSerializer):
    """With evaluate_run's report (`metrics`, `stderr`, ...), null until the run is done."""

    evaluation = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "evaluation"]

    def get_evaluation(self, run) -> dict | None:
        return run_metrics(run)


class RunRequestSerializer(serializers.Serializer):
    """What it takes to start a run; `save()` creates it and sends it to a worker. Rules beyond
    these field checks (valid k1 and b, ...) are the run service's: its InputError becomes a
    validation error on the field it names. Pass the requesting user as context["user"]."""

    collection = serializers.PrimaryKeyRelatedField(queryset=Collection.objects.all())
    retriever = serializers.ChoiceField(choices=Retriever.Kind.choices)
    k1 = serializers.FloatField(default=DEFAULT_K1)
    b = serializers.FloatField(default=DEFAULT_B)
    context_left = serializers.IntegerField(default=DEFAULT_CONTEXT[0], min_value=0, max_value=50)
    context_right = serializers.IntegerField(default=DEFAULT_CONTEXT[1], min_value=0, max_value=50)
    depth = serializers.IntegerField(default=DEFAULT_DEPTH, min_value=1, max_value=10000)
    model = serializers.CharField(default="", allow_blank=True, max_length=1000,
                                  help_text="Dense only: a model name or folder, or a trained retriever; empty: the default model.")

    def create(self, validated_data) -> Run:
        try:
            retriever = get_or_create_retriever(
                validated_data["retriever"], k1=validated_data["k1"], b=validated_data["b"], model=validated_data["model"]
            )
            return start_run_async(
                validated_data["collection"], retriever, user=self.context.get("user"),
                context_left=validated_data["context_left"], context_right=validated_data["context_right"],
                depth=validated_data["depth"],
            )
        except InputError as exc:
            raise serializers.ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
