"""Forms of the annotation pages. They check types and ranges only; the study rules (a run of
the same collection, a book of that collection, enough usable negatives, a valid label schema)
stay in `annotation.services`, whose InputError names the field the form shows it under."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from retrieval.errors import InputError
from retrieval.fields import AsciiFloatFormField, AsciiIntegerFormField
from retrieval.input_rules import is_digits, load_json
from retrieval.models import Collection, Document, Run

from .label_schema import RATIONALE_MODES, SCALES, SPAN_TARGETS
from .models import PeerReview, Pool, Study
from .preference_schema import BOTH_BAD, MAX_LIST_SIZE, SHAPES, TIE
from .presentation import ACTIONS, DEFAULT_KEYS, DEFAULT_OPTION_KEYS
from .services.preference_designs import DEFAULT_ALPHA
from .services.preference_studies import DEFAULT_BATCH, RULES
from .services.studies import MAX_CANDIDATES, MAX_CONTEXT_SENTENCES, MAX_JUDGMENTS_PER_ITEM, MIN_CANDIDATES

# The POST names of rubric radio groups: "rubric-<field name>".
RUBRIC_PREFIX = "rubric-"
# The POST names of a list item's rank radio groups: "rank-<display position>".
RANK_PREFIX = "rank-"


class RunChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, run: Run) -> str:
        return run_label(run)


class RunsChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, run: Run) -> str:
        return run_label(run)


def run_label(run: Run) -> str:
    return f"run {run.pk}: {run.retriever.name} on {run.collection.name}"


def finished_runs():
    return Run.objects.filter(status=Run.Status.DONE).select_related("retriever", "collection")


class BookChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, document: Document) -> str:
        return f"{document.title} ({document.collection.name})"


class AnnotatorChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, user) -> str:
        return user.get_username()


class ServiceErrorsMixin:
    def add_service_error(self, error) -> None:
        """Show an InputError under the field it names (or above the form). Schema errors name
        `label_schema.<key>[...]`: they go under the form field of that key when there is one."""
        field = error.field or ""
        if field.startswith("label_schema."):
            key = field.removeprefix("label_schema.").split(".")[0].split("[")[0]
            detail = field.removeprefix("label_schema.")
            if key in self.fields:
                self.add_error(key, f"{detail}: {error.message}" if detail != key else error.message)
                return
        if field.startswith("keyboard."):
            field = KEY_FIELDS.get(field.removeprefix("keyboard."), field)
        self.add_error(field if field in self.fields else None, error.message)


# The form field of each key setting (Study.keyboard's names, annotation.presentation).
KEY_FIELDS = {"options": "option_keys", **{action: f"{action}_key" for action in ACTIONS}}


class PresentationSettingsForm(forms.Form):
    """How the annotation page presents the study (annotation.presentation): the candidate order,
    the keys and auto-advance, in a section of their own; `presentation_settings()` gives
    apply_presentation's arguments."""

    candidate_order = forms.ChoiceField(
        choices=Study.CandidateOrder.choices,
        initial=Study.CandidateOrder.ITEM,
        required=False,
        label="Candidate order",
        help_text="Shuffled per annotator: each annotator sees an item's candidates in an order of their own "
        "(seeded by the study seed, recorded with each judgment), so the report can tell position effects "
        "from content.",
    )
    option_keys = forms.CharField(
        max_length=len(DEFAULT_OPTION_KEYS),
        initial=DEFAULT_OPTION_KEYS,
        required=False,
        label="Option keys",
        help_text="The keys that pick the 1st, 2nd, ... option shown, in order (e.g. asdfjkl for the home row).",
    )
    skip_key = forms.CharField(max_length=1, required=False, initial=DEFAULT_KEYS["skip"], label="Skip key")
    flag_key = forms.CharField(max_length=1, required=False, initial=DEFAULT_KEYS["flag"], label="Flag key")
    unsure_key = forms.CharField(max_length=1, required=False, initial=DEFAULT_KEYS["unsure"], label="Unsure key")
    undo_key = forms.CharField(max_length=1, required=False, initial=DEFAULT_KEYS["undo"], label="Undo key")
    mark_key = forms.CharField(
        max_length=1,
        required=False,
        initial=DEFAULT_KEYS["mark"],
        label="Mark-span key",
        help_text="Empty: no key for that action (its button stays). ? is kept for the list of shortcuts.",
    )
    auto_advance = forms.BooleanField(
        required=False,
        label="Auto-advance",
        help_text="Choosing the last answer an item needs submits it and shows the next item (z still undoes it).",
    )

    PRESENTATION_FIELDS = ("candidate_order", *KEY_FIELDS.values(), "auto_advance")

    def presentation_settings(self) -> dict:
        """apply_presentation's arguments. A key field left out of the post keeps its default
        (a client that predates these fields); one posted empty turns that action's key off."""
        data = self.cleaned_data
        return {
            "candidate_order": data["candidate_order"] or Study.CandidateOrder.ITEM,
            "keyboard": {name: data[field] for name, field in KEY_FIELDS.items() if field in self.data},
            "auto_advance": data["auto_advance"],
        }

    def sections(self) -> list[tuple[str, list]]:
        """The other sections without these fields, then the annotation page's."""
        sections = [
            (title, [field for field in fields if field.name not in self.PRESENTATION_FIELDS])
            for title, fields in super().sections()
        ]
        return [*sections, ("Annotation page", [self[name] for name in self.PRESENTATION_FIELDS])]

    def study_settings(self) -> dict:
        settings = super().study_settings()
        return {name: value for name, value in settings.items() if name not in self.PRESENTATION_FIELDS}


class QualitySettingsForm(forms.Form):
    """The quality-control settings every kind of study may have (shares between 0 and 1). Left
    empty, a setting keeps the service's default; an empty threshold means no qualification round."""

    qualification_threshold = AsciiFloatFormField(
        min_value=0,
        max_value=1,
        required=False,
        label="Qualification pass threshold",
        help_text="Share correct needed, e.g. 0.9. Empty: no qualification round.",
    )
    qualification_questions = AsciiIntegerFormField(
        min_value=0,
        required=False,
        initial=0,
        label="Qualification questions",
        help_text="Items with a known answer (from the qrels) drawn as the round's questions.",
    )
    qualification_attempts = AsciiIntegerFormField(
        min_value=1,
        max_value=20,
        required=False,
        initial=2,
        label="Qualification attempts",
        help_text="Retries allowed, the first included.",
    )
    gold_rate = AsciiFloatFormField(
        min_value=0,
        max_value=1,
        required=False,
        initial=0.0,
        label="Hidden gold rate",
        help_text="Share of formal items that are hidden gold checks.",
    )
    gold_accuracy_threshold = AsciiFloatFormField(
        min_value=0, max_value=1, required=False, initial=0.7, help_text="Flag annotators below this gold accuracy."
    )
    fast_fraction = AsciiFloatFormField(
        min_value=0,
        max_value=1,
        required=False,
        initial=0.3,
        label="Too-fast fraction",
        help_text="Flag annotators whose median time is below this share of the study's.",
    )
    peer_review_rate = AsciiFloatFormField(
        min_value=0,
        max_value=1,
        required=False,
        initial=0.0,
        help_text="Share of each annotator's judgments sampled for peer review.",
    )
    peer_pass_target = AsciiFloatFormField(
        min_value=0, max_value=1, required=False, initial=0.95, label="Peer pass-rate target"
    )

    QUALITY_FIELDS = (
        "qualification_threshold",
        "qualification_questions",
        "qualification_attempts",
        "gold_rate",
        "gold_accuracy_threshold",
        "fast_fraction",
        "peer_review_rate",
        "peer_pass_target",
    )

    def quality_settings(self) -> dict:
        """`apply_quality_settings`'s arguments: the threshold as given, the others when given."""
        data = self.cleaned_data
        settings = {
            name: data[name]
            for name in self.QUALITY_FIELDS
            if name not in ("qualification_threshold", "qualification_questions") and data[name] is not None
        }
        return {"qualification_threshold": data["qualification_threshold"], **settings}

    def question_count(self) -> int:
        return self.cleaned_data["qualification_questions"] or 0

    def sections(self) -> list[tuple[str, list]]:
        """The form's fields as the page groups them: the study itself, then quality control."""
        quality = [self[name] for name in self.QUALITY_FIELDS]
        return [
            ("Study", [field for field in self if field.name not in self.QUALITY_FIELDS]),
            ("Quality control", quality),
        ]

    def study_settings(self) -> dict:
        """The create service's arguments: every field but the quality settings."""
        return {name: value for name, value in self.cleaned_data.items() if name not in self.QUALITY_FIELDS}


class StudyBasicsForm(ServiceErrorsMixin, forms.Form):
    """What every study kind is created with, under the services' argument names."""

    name = forms.CharField(max_length=200)
    collection = forms.ModelChoiceField(queryset=Collection.objects.order_by("name"))
    judgments_per_item = AsciiIntegerFormField(min_value=1, max_value=MAX_JUDGMENTS_PER_ITEM, initial=3)
    seed = AsciiIntegerFormField(initial=0, help_text="Same seed, same data: the same items in the same order.")
    context_left = AsciiIntegerFormField(
        min_value=0, max_value=MAX_CONTEXT_SENTENCES, initial=4, label="Context sentences on the left"
    )
    context_right = AsciiIntegerFormField(
        min_value=0, max_value=MAX_CONTEXT_SENTENCES, initial=4, label="Context sentences on the right"
    )
    guidelines = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
    annotators = AnnotatorChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may work on it. None ticked: every active annotator.",
    )
    claim_minutes = AsciiIntegerFormField(
        min_value=1,
        initial=30,
        label="Claim expires after (minutes)",
        help_text="An item left unanswered this long goes back to the queue.",
    )
    more_context = forms.BooleanField(
        required=False,
        initial=True,
        label="Annotators may ask for more context",
        help_text="A “More context” button shows the sentences around a candidate in its book.",
    )


class ProxyStudyForm(StudyBasicsForm, PresentationSettingsForm, QualitySettingsForm):
    """The settings of `create_proxy_study`, under the same names."""

    negatives_run = RunChoiceField(
        queryset=finished_runs(),
        label="Negatives from run",
        help_text="The best-ranked usable passages of this run become the negatives.",
    )
    items = AsciiIntegerFormField(min_value=1, initial=100, label="Number of items")
    candidates = AsciiIntegerFormField(
        min_value=MIN_CANDIDATES,
        max_value=MAX_CANDIDATES,
        initial=3,
        label="Candidates per item (k)",
        help_text="The gold and k - 1 negatives.",
    )
    single_sentence = forms.BooleanField(required=False, label="Single-sentence quotations only")
    more_context = forms.BooleanField(
        required=False,
        initial=False,
        label="Annotators may ask for more context",
        help_text="Off by default for proxy studies: the sentences around the right candidate are the "
        "quotation's own context, so more context can give the answer away.",
    )
    book = BookChoiceField(
        queryset=Document.objects.select_related("collection").order_by("collection__name", "ordinal"),
        required=False,
        label="Book",
        help_text="Only queries about this book (optional).",
    )

    field_order = [
        "name",
        "collection",
        "negatives_run",
        "items",
        "candidates",
        "judgments_per_item",
        "seed",
        "context_left",
        "context_right",
        "single_sentence",
        "book",
        "guidelines",
        "annotators",
        "claim_minutes",
        "more_context",
        *QualitySettingsForm.QUALITY_FIELDS,
    ]


class LabelSchemaForm(StudyBasicsForm):
    """The label schema of a relevance or quotability study, field by field; `label_schema()`
    assembles them in the schema's JSON format (validated by the service)."""

    question = forms.CharField(
        max_length=500, required=False, help_text="Shown to annotators; empty: the kind's default question."
    )
    spans = forms.ChoiceField(
        choices=[("", "No spans"), *((target, f"Spans on the {target}") for target in SPAN_TARGETS)],
        required=False,
        label="Span marking",
    )
    spans_required = forms.BooleanField(required=False, label="At least one span required")
    rubric = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "code"}),
        required=False,
        label="Rubric fields (JSON)",
        help_text='A list of fields, e.g. [{"name": "specificity", "values": [0, 1], "labels": {"0": "broad", '
        '"1": "specific"}}]. Empty: no rubric.',
    )
    rationale = forms.ChoiceField(
        choices=[(mode, f"Rationale: {mode}") for mode in RATIONALE_MODES], initial="none", label="Rationale"
    )

    def clean_rubric(self):
        text = self.cleaned_data["rubric"].strip()
        if not text:
            return []
        try:
            return load_json(text)
        except InputError as error:
            raise forms.ValidationError(error.for_people()) from None

    SCHEMA_FIELDS = ("scale", "question", "spans", "spans_required", "rubric", "rationale", "multi_select")

    def study_settings(self) -> dict:
        """The create service's arguments: the schema fields assembled into `label_schema`."""
        settings = {name: value for name, value in super().study_settings().items() if name not in self.SCHEMA_FIELDS}
        return {**settings, "label_schema": self.label_schema()}

    def label_schema(self) -> dict:
        data = self.cleaned_data
        schema = {
            "rubric": data["rubric"],
            "rationale": data["rationale"],
            "spans": data["spans"] or None,
            "spans_required": data["spans_required"],
        }
        if "scale" in data:
            schema["scale"] = data["scale"]
        if data["question"].strip():
            schema["question"] = data["question"].strip()
        if data.get("multi_select"):
            schema["multi_select"] = True
        return schema


class RelevanceStudyForm(LabelSchemaForm, PresentationSettingsForm, QualitySettingsForm):
    """The settings of `create_relevance_study`, plus its label schema and quality control."""

    runs = RunsChoiceField(
        queryset=finished_runs(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Their top hits are pooled (deduplicated) into (query, passage) items.",
    )
    depth = AsciiIntegerFormField(min_value=1, initial=10, label="Top k of each run")
    use_pools = forms.BooleanField(required=False, label="Add each query's own pool")
    n_queries = AsciiIntegerFormField(
        min_value=1,
        required=False,
        label="Number of queries",
        help_text="Empty: every query with at least one passage.",
    )
    scale = forms.ChoiceField(choices=[(scale, scale) for scale in SCALES], initial="binary")
    pool = forms.ChoiceField(
        choices=Pool.Strategy.choices,
        initial=Pool.Strategy.DEPTH,
        required=False,
        label="Pooling strategy",
        help_text="Which pairs of the runs' top k are judged: all of them (depth), in fusion order until the "
        "budget (rrf, rbp), or move-to-front: runs whose pairs are judged relevant get more of theirs judged.",
    )
    budget = AsciiIntegerFormField(
        min_value=1, required=False, label="Budget (pairs judged in all)", help_text="Empty: no limit."
    )
    budget_per_query = AsciiIntegerFormField(
        min_value=1, required=False, label="Budget per query", help_text="Empty: no limit."
    )
    rrf_k = AsciiIntegerFormField(
        min_value=0, initial=60, required=False, label="RRF k", help_text="rrf: 1 / (k + rank)."
    )
    rbp_p = AsciiFloatFormField(
        min_value=0, max_value=1, initial=0.8, required=False, label="RBP p", help_text="rbp: (1 - p) p^(rank - 1)."
    )
    lookahead = AsciiIntegerFormField(
        min_value=1,
        initial=1,
        required=False,
        label="Look-ahead",
        help_text="mtf: pairs kept open for annotators before the judgments that choose them are in.",
    )

    POOL_FIELDS = ("pool", "budget", "budget_per_query", "rrf_k", "rbp_p", "lookahead")
    # Left empty, these keep the service's default.
    POOL_DEFAULTED = ("rrf_k", "rbp_p", "lookahead")

    field_order = [
        "name",
        "collection",
        "runs",
        "depth",
        "use_pools",
        *POOL_FIELDS,
        "n_queries",
        "judgments_per_item",
        "seed",
        "context_left",
        "context_right",
        "scale",
        "question",
        "spans",
        "spans_required",
        "rationale",
        "rubric",
        *QualitySettingsForm.QUALITY_FIELDS,
        "guidelines",
        "annotators",
        "claim_minutes",
        "more_context",
    ]

    def sections(self) -> list[tuple[str, list]]:
        """The study, then how its pairs are pooled, then quality control."""
        (title, fields), *rest = super().sections()
        pooled = [field for field in fields if field.name in self.POOL_FIELDS]
        return [(title, [field for field in fields if field.name not in self.POOL_FIELDS]), ("Pool", pooled), *rest]

    def study_settings(self) -> dict:
        """Pool settings left empty keep the service's defaults (no strategy given: depth)."""
        settings = super().study_settings()
        settings["pool"] = settings["pool"] or Pool.Strategy.DEPTH
        return {name: value for name, value in settings.items() if not (name in self.POOL_DEFAULTED and value is None)}


class QuotabilityStudyForm(LabelSchemaForm, PresentationSettingsForm, QualitySettingsForm):
    """The settings of `create_quotability_study`, plus its schema and quality control."""

    multi_select = forms.BooleanField(
        required=False,
        label="Pilot: select all quotable paragraphs of a source",
        help_text="One item per context showing every paragraph of its source.",
    )
    run = RunChoiceField(
        queryset=finished_runs(), required=False, help_text="Whose paragraphs are judged (not for the pilot)."
    )
    selection = forms.ChoiceField(
        choices=[
            ("top_non_gold", "The run's top paragraph, where it is not the gold"),
            ("top_k", "The run's top k paragraphs"),
        ],
        initial="top_non_gold",
    )
    depth = AsciiIntegerFormField(min_value=1, initial=1, label="Top k (for top k)")
    candidates_from = forms.ChoiceField(
        choices=[("document", "The gold's source document"), ("pool", "The query's own pool")],
        initial="document",
        label="Pilot paragraphs from",
    )
    n_queries = AsciiIntegerFormField(
        min_value=1, required=False, label="Number of contexts", help_text="Empty: every context that gives an item."
    )

    field_order = [
        "name",
        "collection",
        "multi_select",
        "run",
        "selection",
        "depth",
        "candidates_from",
        "n_queries",
        "judgments_per_item",
        "seed",
        "context_left",
        "context_right",
        "question",
        "spans",
        "spans_required",
        "rationale",
        "rubric",
        *QualitySettingsForm.QUALITY_FIELDS,
        "guidelines",
        "annotators",
        "claim_minutes",
        "more_context",
    ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["judgments_per_item"].initial = 5
        self.fields["context_right"].initial = 0
        self.fields["spans"].choices = [("", "No excerpt span"), ("passage", "Mark the excerpt in the paragraph")]


class ExtendPoolForm(ServiceErrorsMixin, forms.Form):
    """Runs to add to a relevance study's pool (finished runs of its collection not pooled yet)."""

    runs = RunsChoiceField(queryset=Run.objects.none(), widget=forms.CheckboxSelectMultiple, label="Runs to add")
    budget = AsciiIntegerFormField(
        min_value=1,
        required=False,
        label="More pairs to judge",
        help_text="Empty: the pool's budget stays (no budget: every new pair of depth pooling).",
    )
    budget_per_query = AsciiIntegerFormField(
        min_value=1, required=False, label="Raise the budget per query by", help_text="Pools with one only."
    )

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["runs"].queryset = (
            finished_runs().filter(collection=study.collection).exclude(pk__in=study.pool.runs).order_by("pk")
        )


class PreferenceStudyForm(StudyBasicsForm, QualitySettingsForm):
    """The settings of `create_preference_study`: where the pools come from, the design and what
    an item asks (the preference schema). Quality control offers what a preference study can
    use: speed flags (gold and qualification items need known answers, which preferences lack).
    It has no annotation-page section: a preference item keeps its own keys and order."""

    def presentation_settings(self) -> dict:
        """Nothing to change: apply_presentation keeps a preference study's defaults."""
        return {}

    runs = RunsChoiceField(
        queryset=finished_runs(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Their top passages, pooled per query, are the candidates compared.",
    )
    depth = AsciiIntegerFormField(min_value=1, initial=10, label="Top k of each run")
    use_pools = forms.BooleanField(required=False, label="Add each query's own pool")
    n_queries = AsciiIntegerFormField(
        min_value=1, required=False, label="Number of queries", help_text="Empty: every query with a pool."
    )
    shape = forms.ChoiceField(choices=[(shape, shape) for shape in SHAPES], initial="pairwise", label="Items show")
    list_size = AsciiIntegerFormField(
        min_value=3, max_value=MAX_LIST_SIZE, required=False, label="Candidates per list", help_text="Lists only."
    )
    ties = forms.BooleanField(required=False, initial=True, label="Allow “tie” answers")
    bad = forms.BooleanField(required=False, initial=True, label="Allow “both bad” answers")
    question = forms.CharField(
        max_length=500, required=False, help_text="Shown to annotators; empty: the default question."
    )
    design = forms.ChoiceField(
        choices=[
            ("all-pairs", "All pairs of each pool"),
            ("random", "A random subset (budget per query)"),
            ("adaptive", "Adaptive: pairs chosen as judgments land"),
        ],
        initial="all-pairs",
    )
    budget = AsciiIntegerFormField(
        min_value=1, required=False, help_text="Pairs (or lists) per query: random and adaptive designs."
    )
    rule = forms.ChoiceField(
        choices=[
            ("top-k", "Top-k preferences (Clarke et al.)"),
            ("informative", "Least certain pairs (Bradley–Terry)"),
        ],
        initial=RULES[0],
        label="Adaptive rule",
    )
    top_k = AsciiIntegerFormField(min_value=1, initial=5, label="Top k to find (top-k rule)")
    batch = AsciiIntegerFormField(min_value=1, initial=DEFAULT_BATCH, label="Open pairs per query (informative rule)")

    field_order = [
        "name",
        "collection",
        "runs",
        "depth",
        "use_pools",
        "n_queries",
        "shape",
        "list_size",
        "ties",
        "bad",
        "question",
        "design",
        "budget",
        "rule",
        "top_k",
        "batch",
        "judgments_per_item",
        "seed",
        "context_left",
        "context_right",
        "guidelines",
        "annotators",
        "claim_minutes",
        "more_context",
        *QualitySettingsForm.QUALITY_FIELDS,
    ]
    SCHEMA_FIELDS = ("shape", "list_size", "ties", "bad", "question")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["judgments_per_item"].required = False
        self.fields["judgments_per_item"].initial = None
        self.fields["judgments_per_item"].help_text = "Empty: 1 for the adaptive design, 3 for the others."

    def study_settings(self) -> dict:
        data = self.cleaned_data
        settings = {name: value for name, value in super().study_settings().items() if name not in self.SCHEMA_FIELDS}
        schema = {"shape": data["shape"], "ties": data["ties"], "bad": data["bad"]}
        if data["list_size"] is not None:
            schema["list_size"] = data["list_size"]
        if data["question"].strip():
            schema["question"] = data["question"].strip()
        if data["design"] != "adaptive":
            settings.pop("rule")
            settings.pop("top_k")
            settings.pop("batch")
        return {**settings, "label_schema": schema, "alpha": DEFAULT_ALPHA}


class PositionsField(forms.Field):
    """Several 0-based positions (checkboxes of one name). Whether the item shows them is the
    service's question."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[int]:
        values = list(value or [])
        if not all(is_digits(str(position)) for position in values):
            raise forms.ValidationError("The selected paragraphs could not be read; select them again.")
        return [int(position) for position in values]


class BlockForm(forms.Form):
    annotator = forms.CharField(max_length=150)
    reason = forms.CharField(max_length=2000, strip=True, error_messages={"required": "a reason is required."})
    exclude_judgments = forms.BooleanField(required=False, label="Leave their judgments out of the statistics")


class DesignateForm(forms.Form):
    """Draw `count` unjudged items with a known answer as hidden gold or qualification items."""

    role = forms.ChoiceField(choices=[("gold", "Hidden gold"), ("qualification", "Qualification questions")])
    count = AsciiIntegerFormField(min_value=1, initial=1)


class AdjudicationForm(forms.Form):
    """The adjudicator's final answer, in whichever part the study's kind takes, with a reason
    from the study's list and a note (the service checks them)."""

    position = AsciiIntegerFormField(min_value=0, required=False)
    label = AsciiIntegerFormField(required=False)
    selections = PositionsField(required=False)
    decides_selections = forms.BooleanField(required=False, widget=forms.HiddenInput)
    reason = forms.CharField(max_length=200, required=False)
    note = forms.CharField(max_length=2000, required=False)

    def decision(self) -> dict:
        """`decide`'s arguments: only the answer part the page posted (a multi-select item may
        be decided as "none selected", so its form says it decides selections)."""
        data = self.cleaned_data
        decision = {"reason": data["reason"], "note": data["note"]}
        if data["decides_selections"]:
            decision["selections"] = data["selections"]
        elif data["position"] is not None:
            decision["position"] = data["position"]
        else:
            decision["label"] = data["label"]
        return decision


class SendBackForm(forms.Form):
    """Why an item goes back for a fresh round: a reason from the study's list and a note."""

    reason = forms.CharField(max_length=200, required=False)
    note = forms.CharField(max_length=2000, required=False)


class AdjudicationSampleForm(forms.Form):
    sample_rate = AsciiFloatFormField(
        min_value=0, max_value=100, label="Share of agreed items to check (%)", help_text="Drawn with the study's seed."
    )


class AdjudicationReasonsForm(forms.Form):
    """A reasons list typed one per line (empty: fall back to the wider list)."""

    reasons = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False, max_length=5000)

    def reasons_list(self) -> list[str]:
        return [line for line in self.cleaned_data["reasons"].splitlines() if line.strip()]


class PeerVerdictForm(forms.Form):
    review = AsciiIntegerFormField(min_value=1)
    verdict = forms.ChoiceField(choices=PeerReview.Verdict.choices)
    comment = forms.CharField(max_length=2000, required=False)


class ItemActionForm(forms.Form):
    """Skip or flag the item shown (a flag with its reason)."""

    item = AsciiIntegerFormField(min_value=1)
    reason = forms.CharField(max_length=2000, required=False, strip=True)


class VoidJudgmentForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True)


class JudgmentForm(forms.Form):
    """The annotator's answer as posted by the page: the item shown, then, by kind, the 0-based
    position of the candidate chosen (proxy) or the label, spans (JSON posted by the page's
    script), rubric radios (`rubric-<name>`), rationale and multi-select positions; and the
    seconds the browser measured (kept as text: a broken timer must not cost the answer, the
    service drops what is not a number). Whether the answer fits the study is the service's call."""

    item = AsciiIntegerFormField(min_value=1)
    choice = AsciiIntegerFormField(min_value=0, max_value=MAX_CANDIDATES - 1, required=False)
    label = AsciiIntegerFormField(required=False)
    spans = forms.CharField(required=False)
    rationale = forms.CharField(required=False, strip=False)
    selections = PositionsField(required=False)
    seconds = forms.CharField(required=False)
    unsure = forms.BooleanField(required=False)

    preference = forms.CharField(required=False, max_length=20)
    both_bad = forms.BooleanField(required=False)

    def __init__(self, data, *, proxy: bool, preference: bool = False):
        super().__init__(data)
        self.proxy = proxy
        self.preference_study = preference

    def clean_choice(self):
        choice = self.cleaned_data["choice"]
        if self.proxy and choice is None:
            raise forms.ValidationError("Choose one of the candidates before submitting.")
        return choice

    def clean_rationale(self) -> str:
        """Browsers post a textarea's line breaks as CRLF; store them as plain newlines."""
        return self.cleaned_data["rationale"].replace("\r\n", "\n")

    def clean_spans(self):
        text = self.cleaned_data["spans"].strip()
        if not text:
            return None
        try:
            return load_json(text)
        except InputError:
            raise forms.ValidationError("The marked spans could not be read; mark them again.") from None

    def preference_answer(self) -> dict:
        """A pair's radio (a position, "tie" or "both_bad"), or a list's rank radios
        (`rank-<position>`) and its "none is good" box, as the service's arguments (positions and
        ranks as posted: the service checks them)."""
        chosen = self.cleaned_data["preference"]
        if self.cleaned_data["both_bad"] or chosen == BOTH_BAD:
            return {"label": BOTH_BAD}
        if chosen == TIE:
            return {"label": TIE}
        if chosen:
            return {"position": chosen}
        positions = [key.removeprefix(RANK_PREFIX) for key in self.data if key.startswith(RANK_PREFIX)]
        if not positions:
            return {}
        if not all(is_digits(position) and int(position) < MAX_LIST_SIZE for position in positions):
            return {"label": {"ranks": []}}
        size = max(int(position) for position in positions) + 1
        return {"label": {"ranks": [self.data.get(f"{RANK_PREFIX}{index}") for index in range(size)]}}

    def rubric(self) -> dict[str, str]:
        """The rubric radios answered, by field name (values as posted: the service checks them)."""
        return {
            key.removeprefix(RUBRIC_PREFIX): value for key, value in self.data.items() if key.startswith(RUBRIC_PREFIX)
        }

    def answer(self) -> dict:
        """The answer's parts under `submit_judgment`'s argument names."""
        data = self.cleaned_data
        if self.proxy:
            return {"position": data["choice"], "unsure": data["unsure"]}
        if self.preference_study:
            return {**self.preference_answer(), "unsure": data["unsure"]}
        return {
            "unsure": data["unsure"],
            "label": data["label"],
            "spans": data["spans"],
            "rubric": self.rubric(),
            "rationale": data["rationale"],
            "selections": data["selections"],
        }
