"""REST shapes of collections, queries, runs, jobs and retrievers, and the one validator for
starting each kind of work: the API and the dashboard forms both use RunRequestSerializer (a run)
and TrainingRequestSerializer (a training); the study page's training form builds on
TrainingParametersSerializer."""

from __future__ import annotations

from contextlib import contextmanager

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from jobs.errors import BrokerUnavailable
from jobs.models import Job
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.errors import InputError
from retrieval.fields import AsciiFloatField, AsciiIntegerField
from retrieval.metrics import run_metrics
from retrieval.models import Collection, Query, Retriever, Run
from retrieval.services.runs import DEFAULT_CONTEXT, DEFAULT_DEPTH, get_or_create_retriever, start_run_async
from retrieval.services.trec_files import start_trec_import
from retrieval.training_jobs import resolve_base_model, start_training_async


@extend_schema_field(OpenApiTypes.BINARY)
class UploadedFileField(serializers.FileField):
    """A file sent in a multipart body. drf-spectacular describes a plain FileField as a URI
    string (what it is in a response), so clients generated from the schema could not upload;
    this one is binary."""


class CollectionSerializer(serializers.ModelSerializer):
    documents = serializers.IntegerField(source="document_count", read_only=True)
    passages = serializers.IntegerField(source="passage_count", read_only=True)
    queries = serializers.IntegerField(source="query_count", read_only=True)
    qrels = serializers.IntegerField(source="qrel_count", read_only=True)
    runs = serializers.IntegerField(source="run_count", read_only=True)

    class Meta:
        model = Collection
        fields = [
            "id",
            "name",
            "kind",
            "description",
            "source",
            "created_at",
            "documents",
            "passages",
            "queries",
            "qrels",
            "runs",
        ]


class QuerySerializer(serializers.ModelSerializer):
    class Meta:
        model = Query
        fields = [
            "id",
            "collection",
            "external_id",
            "text",
            "left_context",
            "right_context",
            "document",
            "quote_length",
            "split",
            "metadata",
        ]
        read_only_fields = fields  # queries come in with their collection's files


class RetrieverSerializer(serializers.ModelSerializer):
    """A retriever; a trained one names the collection it was trained on and its training job."""

    trained_on_name = serializers.CharField(source="trained_on.name", read_only=True, default=None, allow_null=True)

    class Meta:
        model = Retriever
        fields = [
            "id",
            "name",
            "kind",
            "parameters",
            "model_path",
            "query_model_path",
            "trained_on",
            "trained_on_name",
            "training_job",
            "created_at",
        ]


class RunSerializer(serializers.ModelSerializer):
    retriever = RetrieverSerializer(read_only=True)
    collection_name = serializers.CharField(source="collection.name", read_only=True)
    job_status = serializers.CharField(source="job.status", read_only=True, default=None, allow_null=True)
    warnings = serializers.SerializerMethodField(
        help_text="Settings the run ignores, e.g. context L/R without contexts."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "collection",
            "collection_name",
            "retriever",
            "name",
            "parameters",
            "warnings",
            "status",
            "seconds",
            "job",
            "job_status",
            "tag",
            "created_at",
        ]
        read_only_fields = fields  # runs are started by RunRequestSerializer or imported by RunImportSerializer

    def get_warnings(self, run: Run) -> list[str]:
        return run.parameters.get("warnings", [])


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
    retriever = serializers.ChoiceField(choices=[Retriever.Kind.BM25, Retriever.Kind.DENSE])
    k1 = AsciiFloatField(default=DEFAULT_K1)
    b = AsciiFloatField(default=DEFAULT_B)
    context_left = AsciiIntegerField(default=DEFAULT_CONTEXT[0], min_value=0, max_value=50)
    context_right = AsciiIntegerField(default=DEFAULT_CONTEXT[1], min_value=0, max_value=50)
    depth = AsciiIntegerField(default=DEFAULT_DEPTH, min_value=1, max_value=10000)
    model = serializers.CharField(
        default="",
        allow_blank=True,
        max_length=1000,
        help_text="Dense only: a model name or folder, or a trained retriever; empty: the default model.",
    )
    query_prompt = serializers.CharField(
        default=None,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=1000,
        help_text='Dense only: text put before each query (E5: "query: "); null: the model\'s own prompt.',
    )
    passage_prompt = serializers.CharField(
        default=None,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=1000,
        help_text='Dense only: text put before each passage (E5: "passage: "); null: the model\'s own prompt.',
    )

    def create(self, validated_data) -> Run:
        with service_errors_on_fields():
            retriever = get_or_create_retriever(
                validated_data["retriever"],
                k1=validated_data["k1"],
                b=validated_data["b"],
                model=validated_data["model"],
            )
            return start_run_async(
                validated_data["collection"],
                retriever,
                user=self.context.get("user"),
                context_left=validated_data["context_left"],
                context_right=validated_data["context_right"],
                depth=validated_data["depth"],
                query_prompt=validated_data["query_prompt"],
                passage_prompt=validated_data["passage_prompt"],
            )


class RunImportSerializer(serializers.Serializer):
    """An uploaded TREC run file to import as a named run; `save()` checks the whole file (a 400
    names its file, line and field) and queues the import, returning its Job."""

    collection = serializers.PrimaryKeyRelatedField(queryset=Collection.objects.all())
    name = serializers.CharField(max_length=200, help_text="The run's name, new in the collection.")
    file = UploadedFileField(help_text="TREC run file: qid Q0 docid rank score tag, one tag.")

    def create(self, validated_data) -> Job:
        upload = validated_data["file"]
        try:
            return start_trec_import(
                validated_data["collection"],
                upload,
                filename=upload.name,
                name=validated_data["name"],
                user=self.context.get("user"),
            )
        except InputError as exc:
            # The whole one-line message: it names the uploaded file and the line.
            raise serializers.ValidationError({exc.field or "file": [str(exc)]}) from exc


class TrainingParametersSerializer(serializers.Serializer):
    """A training's settings: train_retriever's keywords, with its defaults (a test holds them
    equal). Only types are checked here; the ranges are the training service's rules, and its
    InputError becomes a validation error on the field it names. Subclasses add where the pairs
    come from and implement `create` -> Job."""

    name = serializers.CharField(max_length=200, help_text="Name of the retriever to register.")
    base_model = serializers.CharField(
        default="",
        allow_blank=True,
        max_length=1000,
        help_text="Where training starts: a registered dense retriever (name or id) to continue it, or a model "
        "name or folder; empty: the default model (the bundled MiniLM unless configured).",
    )
    batch_size = AsciiIntegerField(default=32, help_text="Pairs per batch, all from one book.")
    learning_rate = AsciiFloatField(default=2e-5, help_text="AdamW learning rate.")
    epochs = AsciiIntegerField(default=1)
    patience = AsciiIntegerField(default=1, help_text="Stop after this many epochs without a lower validation loss.")
    asymmetric = serializers.BooleanField(default=False, help_text="Separate query and passage encoders (RELiC).")
    max_steps = AsciiIntegerField(
        default=None, allow_null=True, help_text="Stop after this many steps; null: no limit."
    )
    seed = AsciiIntegerField(default=0)

    def validate_base_model(self, value: str) -> str | None:
        try:
            return resolve_base_model(value)
        except InputError as exc:
            raise serializers.ValidationError(exc.message) from exc


class TrainingRequestSerializer(TrainingParametersSerializer):
    """Training on a collection's "train" queries (early stopping on its "validation"/"dev"
    ones); `save()` queues it on the "gpu" queue and returns its Job. Pass the requesting user as
    context["user"]."""

    collection = serializers.PrimaryKeyRelatedField(queryset=Collection.objects.all())
    context_left = AsciiIntegerField(default=DEFAULT_CONTEXT[0], min_value=0, max_value=50)
    context_right = AsciiIntegerField(default=DEFAULT_CONTEXT[1], min_value=0, max_value=50)

    def create(self, validated_data) -> Job:
        parameters = dict(validated_data)
        collection = parameters.pop("collection")
        with service_errors_on_fields():
            return start_training_async(collection, self.context.get("user"), **parameters)


@contextmanager
def service_errors_on_fields():
    """A service's InputError as a validation error under the field it names (forms show it
    beside that field), or as a non-field error when it names none."""
    try:
        yield
    except InputError as exc:
        raise serializers.ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc


def request_defaults(serializer_class: type[serializers.Serializer]) -> dict:
    """The values a request serializer fills in for omitted fields: what its form shows at first."""
    return {name: field.default for name, field in serializer_class().fields.items() if field.default is not empty}


def save_or_errors(serializer: serializers.Serializer):
    """For HTML forms: (the created object, {}) or (None, the errors by field), whether the
    serializer or the service refused; an unreachable task queue is a form-wide error."""
    if not serializer.is_valid():
        return None, serializer.errors
    try:
        return serializer.save(), {}
    except serializers.ValidationError as exc:
        return None, exc.detail
    except BrokerUnavailable as exc:
        return None, {"non_field_errors": [str(exc)]}
