"""Request and response shapes of the annotation API. Validation of rules lives in the services;
these only check types and shapes."""

from django.contrib.auth import get_user_model
from rest_framework import serializers

from jobs.models import Job
from retrieval.fields import AsciiFloatField, AsciiIntegerField
from retrieval.models import Collection, Document, Run
from retrieval.serializers import TrainingParametersSerializer, service_errors_on_fields

from .models import Pool, Study
from .services.label_studies import MULTI_SELECT_SOURCES, QUOTABILITY_SELECTIONS
from .services.preference_studies import DESIGNS, RULES
from .services.presentation import PRESENTATION_FIELDS
from .services.studies import MAX_CANDIDATES, MIN_CANDIDATES
from .services.study_training import DEFAULT_VALIDATION_SHARE, start_study_training


class StudySerializer(serializers.ModelSerializer):
    """Staff view of a study, with its progress counts (`overview`, filled in by the view)."""

    collection = serializers.SlugRelatedField(slug_field="name", read_only=True)
    annotators = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "kind",
            "status",
            "collection",
            "negatives_run",
            "seed",
            "candidates_per_item",
            "judgments_per_item",
            "context_left",
            "context_right",
            "guidelines",
            "label_schema",
            "claim_minutes",
            "annotators",
            "max_items_per_annotator",
            "candidate_order",
            "keyboard",
            "auto_advance",
            "parameters",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class PresentationSerializer(serializers.Serializer):
    """A study's presentation settings (annotation.presentation): how the annotation page orders
    candidates and which keys it uses. Each is optional: what is left out stays as it is."""

    candidate_order = serializers.ChoiceField(
        choices=Study.CandidateOrder.choices,
        required=False,
        help_text="item (default): every annotator sees the item's order; annotator: an order of their own, "
        "seeded by the study seed and recorded with each judgment.",
    )
    keyboard = serializers.JSONField(
        required=False,
        help_text='The annotation page\'s keys that differ from the defaults: {"options": "1234567890abcdefghij", '
        '"skip": "s", "flag": "r", "unsure": "u", "undo": "z", "mark": "m"} ("" turns an action\'s key off).',
    )
    auto_advance = serializers.BooleanField(
        required=False, help_text="Choosing the last answer an item needs submits it (default false)."
    )


class StudyCreateSerializer(PresentationSerializer):
    """Any kind of study. Common fields first; then each kind's own (`KIND_FIELDS`): a field of
    another kind is refused, so a typo never silently builds a different study. Defaults that
    depend on the kind (judgments per item, context) are filled in by `service_arguments`."""

    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=Study.Kind.choices, default=Study.Kind.PROXY.value)
    collection = serializers.SlugRelatedField(slug_field="name", queryset=Collection.objects.all())
    judgments_per_item = AsciiIntegerField(min_value=1, required=False)
    seed = AsciiIntegerField(default=0)
    context_left = AsciiIntegerField(min_value=0, required=False)
    context_right = AsciiIntegerField(min_value=0, required=False)
    guidelines = serializers.CharField(allow_blank=True, default="")
    annotators = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False
    )
    claim_minutes = AsciiIntegerField(min_value=1, default=30)
    more_context = serializers.BooleanField(
        required=False,
        help_text="Annotators may read the book around a candidate. Default: off for proxy studies (the gold's "
        "neighbours are the quotation's own context, so it can give the answer away), on for the others.",
    )
    # proxy
    negatives_run = serializers.PrimaryKeyRelatedField(queryset=Run.objects.all(), required=False)
    items = AsciiIntegerField(min_value=1, required=False)
    candidates = AsciiIntegerField(min_value=MIN_CANDIDATES, max_value=MAX_CANDIDATES, required=False)
    single_sentence = serializers.BooleanField(required=False)
    book = serializers.PrimaryKeyRelatedField(queryset=Document.objects.all(), required=False, allow_null=True)
    # relevance and quotability
    runs = serializers.PrimaryKeyRelatedField(queryset=Run.objects.all(), many=True, required=False)
    depth = AsciiIntegerField(min_value=1, required=False)
    use_pools = serializers.BooleanField(required=False)
    run = serializers.PrimaryKeyRelatedField(queryset=Run.objects.all(), required=False, allow_null=True)
    selection = serializers.ChoiceField(choices=QUOTABILITY_SELECTIONS, required=False)
    candidates_from = serializers.ChoiceField(choices=MULTI_SELECT_SOURCES, required=False)
    queries = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=False)
    n_queries = AsciiIntegerField(min_value=1, required=False)
    label_schema = serializers.JSONField(required=False)
    # relevance pools (docs/DESIGN.md, Pools) and preference designs: `budget` is judged pairs in all
    # for a pool, pairs (or lists) per query for a preference study's random or adaptive design
    pool = serializers.ChoiceField(choices=Pool.Strategy.choices, required=False)
    budget = AsciiIntegerField(min_value=1, required=False, allow_null=True)
    budget_per_query = AsciiIntegerField(min_value=1, required=False, help_text="Most pairs judged per query.")
    rrf_k = AsciiIntegerField(min_value=0, required=False, help_text="rrf: 1 / (k + rank); default 60.")
    rbp_p = AsciiFloatField(required=False, help_text="rbp: (1 - p) p^(rank - 1); default 0.8.")
    lookahead = AsciiIntegerField(min_value=1, required=False, help_text="mtf: pairs kept open; default 1.")
    # preference (also runs, depth, use_pools, queries, n_queries, label_schema: the preference schema)
    design = serializers.ChoiceField(choices=DESIGNS, required=False)
    rule = serializers.ChoiceField(choices=RULES, required=False)
    top_k = AsciiIntegerField(min_value=1, required=False)
    pairings = AsciiIntegerField(min_value=1, required=False, allow_null=True)
    all_pairs_below = AsciiIntegerField(min_value=1, required=False, allow_null=True)
    batch = AsciiIntegerField(min_value=1, required=False)
    alpha = AsciiFloatField(min_value=0, required=False)

    COMMON_FIELDS = (
        "name",
        "collection",
        "judgments_per_item",
        "seed",
        "context_left",
        "context_right",
        "guidelines",
        "annotators",
        "claim_minutes",
        "more_context",
        *PRESENTATION_FIELDS,
    )
    LABEL_FIELDS = ("queries", "n_queries", "label_schema")
    KIND_FIELDS = {
        Study.Kind.PROXY: ("negatives_run", "items", "candidates", "single_sentence", "book"),
        Study.Kind.RELEVANCE: (
            "runs",
            "depth",
            "use_pools",
            "pool",
            "budget",
            "budget_per_query",
            "rrf_k",
            "rbp_p",
            "lookahead",
            *LABEL_FIELDS,
        ),
        Study.Kind.QUOTABILITY: ("run", "selection", "depth", "candidates_from", *LABEL_FIELDS),
        Study.Kind.PREFERENCE: (
            "runs",
            "depth",
            "use_pools",
            *LABEL_FIELDS,
            "design",
            "budget",
            "rule",
            "top_k",
            "pairings",
            "all_pairs_below",
            "batch",
            "alpha",
        ),
    }
    REQUIRED = {Study.Kind.PROXY: ("negatives_run", "items"), Study.Kind.PREFERENCE: ("design",)}
    # None: the service's own default (a preference study's depends on its design).
    DEFAULT_JUDGMENTS = {Study.Kind.QUOTABILITY: 5, Study.Kind.PREFERENCE: None}
    DEFAULT_CONTEXT_RIGHT = {Study.Kind.QUOTABILITY: 0}

    def validate(self, attrs):
        kind = attrs["kind"]
        foreign = sorted(set(attrs) - {"kind", *self.COMMON_FIELDS, *self.KIND_FIELDS[kind]})
        if foreign:
            raise serializers.ValidationError({name: [f"not a setting of {kind} studies"] for name in foreign})
        missing = [name for name in self.REQUIRED.get(kind, ()) if name not in attrs]
        if missing:
            raise serializers.ValidationError({name: ["required for this kind of study"] for name in missing})
        return attrs

    def service_arguments(self) -> tuple[str, dict]:
        """The kind and the keyword arguments of its create_*_study service (the presentation
        settings apart: `presentation()`)."""
        options = {name: value for name, value in self.validated_data.items() if name not in PRESENTATION_FIELDS}
        kind = options.pop("kind")
        options.setdefault("judgments_per_item", self.DEFAULT_JUDGMENTS.get(kind, 3))
        options.setdefault("context_left", 4)
        options.setdefault("context_right", self.DEFAULT_CONTEXT_RIGHT.get(kind, 4))
        return kind, options

    def presentation(self) -> dict:
        """apply_presentation's arguments: the presentation settings given."""
        return {name: value for name, value in self.validated_data.items() if name in PRESENTATION_FIELDS}


class PoolExtensionSerializer(serializers.Serializer):
    """Runs to add to a relevance study's pool (`extend_study`)."""

    runs = serializers.PrimaryKeyRelatedField(queryset=Run.objects.all(), many=True, allow_empty=False)
    budget = AsciiIntegerField(min_value=1, required=False, help_text="Judge up to this many more pairs.")
    budget_per_query = AsciiIntegerField(min_value=1, required=False, help_text="Raise the budget per query.")


class SubmitSerializer(serializers.Serializer):
    """An answer: the opaque candidate id from the item payload, or its 0-based position (proxy);
    a label or a multi-select's selected positions, with spans, rubric and rationale where the
    study's schema asks for them (label kinds). The services check it against the schema."""

    item = AsciiIntegerField()
    candidate = AsciiIntegerField(required=False)
    position = AsciiIntegerField(required=False, min_value=0)
    label = serializers.JSONField(required=False)
    selections = serializers.JSONField(required=False)
    spans = serializers.JSONField(required=False)
    rubric = serializers.JSONField(required=False)
    rationale = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    seconds = AsciiFloatField(required=False, allow_null=True)
    unsure = serializers.BooleanField(default=False, help_text="The annotator is guessing; kept beside the answer.")

    def validate(self, attrs):
        if not {"candidate", "position", "label", "selections"} & attrs.keys():
            raise serializers.ValidationError(
                "give the chosen candidate (or its position), a label, or the selected positions"
            )
        return attrs


class ItemReferenceSerializer(serializers.Serializer):
    """The item an annotator acts on (skip), by the id its payload gave."""

    item = AsciiIntegerField()


class ItemFlagSerializer(ItemReferenceSerializer):
    reason = serializers.CharField(max_length=2000, help_text="What is wrong with the item.")


class VoidSerializer(serializers.Serializer):
    reason = serializers.CharField()


class StudyTrainingRequestSerializer(TrainingParametersSerializer):
    """Training a dense retriever on a study's judgments (the study page's form and its API twin);
    `save()` queues it and returns its Job. Context sizes are the study's. Pass the study as
    context["study"] and the requesting user as context["user"]."""

    validation_share = AsciiFloatField(
        default=DEFAULT_VALIDATION_SHARE,
        help_text="Share of the judged items held out for early stopping.",
    )

    def create(self, validated_data) -> Job:
        with service_errors_on_fields():
            return start_study_training(self.context["study"], self.context.get("user"), **validated_data)
