"""Studies, the items annotators see, their assignments and the judgments they give.

Gold answers and the provenance of candidates (which run, which rank) live on `ItemCandidate`
and are read only by staff code paths; annotator-facing selectors never select those fields.
The rules (creating studies, the work queue, submitting and voiding) live in
`annotation.services`; what is read back lives in `annotation.selectors`.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from retrieval.models import Collection, Passage, Query, Run


class Study(models.Model):
    class Kind(models.TextChoices):
        PROXY = "proxy", "Proxy: which candidate fills the masked quotation"
        RELEVANCE = "relevance", "Relevance labels"
        QUOTABILITY = "quotability", "Quotability ratings"
        PREFERENCE = "preference", "Preferences: which candidate is better"

    class Status(models.TextChoices):
        OPEN = "open", "Open for annotation"
        CLOSED = "closed", "Closed"

    class CandidateOrder(models.TextChoices):
        ITEM = "item", "One order per item"
        ANNOTATOR = "annotator", "Shuffled per annotator"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="studies")
    negatives_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    seed = models.IntegerField(default=0)
    candidates_per_item = models.PositiveSmallIntegerField(default=3)
    judgments_per_item = models.PositiveSmallIntegerField(default=3)
    context_left = models.PositiveSmallIntegerField(default=4)
    context_right = models.PositiveSmallIntegerField(default=4)
    guidelines = models.TextField(blank=True)
    label_schema = models.JSONField(default=dict, blank=True)
    claim_minutes = models.PositiveIntegerField(default=30, help_text="An unfinished claim expires after this.")
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="studies",
        help_text="Who may work on it. Empty: every active annotator.",
    )
    max_items_per_annotator = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most formal items one annotator may judge; empty: no cap. (A crowd link's quota is its own.)",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    more_context = models.BooleanField(
        default=False,
        help_text="Annotators may read the sentences around a candidate in its book. Off for proxy studies "
        "by default: the gold's neighbours are the quotation's own context, so it can give the answer away.",
    )
    # Quality control. A study with a qualification threshold shows each annotator its
    # qualification items first; formal work unlocks at `qualification_threshold` accuracy.
    qualification_threshold = models.FloatField(
        null=True, blank=True, help_text="Share correct needed to pass the qualification round; empty: no round."
    )
    qualification_attempts = models.PositiveSmallIntegerField(default=2, help_text="Attempts allowed (retry policy).")
    gold_rate = models.FloatField(default=0.0, help_text="Share of hidden gold items mixed into formal work.")
    gold_accuracy_threshold = models.FloatField(default=0.7, help_text="Flag annotators below this gold accuracy.")
    fast_fraction = models.FloatField(
        default=0.3, help_text="Flag annotators whose median seconds fall below this share of the study median."
    )
    peer_review_rate = models.FloatField(
        default=0.0, help_text="Share of each annotator's judgments sampled for peer review."
    )
    peer_pass_target = models.FloatField(default=0.95, help_text="Peer-review pass rate an annotator should reach.")
    adjudication_sample_rate = models.FloatField(
        default=0.0,
        help_text="Share of the items whose annotators agree that the adjudication queue also shows (seeded).",
    )
    allow_revisions = models.BooleanField(
        default=False,
        help_text="While the study is open, annotators may go back to their earlier answers and revise them "
        "(each revision recorded, the earlier answer kept).",
    )
    parameters = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the items were drawn (filters, requested count, skipped queries), for reproducibility.",
    )
    # How the annotation page presents items (annotation/presentation.py).
    candidate_order = models.CharField(
        max_length=20,
        choices=CandidateOrder.choices,
        default=CandidateOrder.ITEM,
        help_text="Whether every annotator sees an item's candidates in the item's order, or in an order "
        "shuffled per annotator (seeded by the study seed, recorded with each judgment).",
    )
    keyboard = models.JSONField(
        default=dict,
        blank=True,
        help_text="The annotation page's shortcut keys that differ from the defaults: options (the keys that "
        "pick candidates by their place), skip, flag, unsure, undo, mark.",
    )
    auto_advance = models.BooleanField(
        default=False, help_text="Choosing the last answer an item needs submits it and shows the next item."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"

    def __str__(self):
        return self.name


class Item(models.Model):
    """One unit of work: a query with its candidates in a fixed display order.

    Every kind uses candidates: a proxy item shows k of them and asks for one; a relevance or
    quotability item shows one passage to label; the quotability pilot shows a source's
    paragraphs and asks for all quotable ones. `role` and `expected_label` are staff-only:
    hidden gold items look exactly like work items to annotators.
    """

    class Role(models.TextChoices):
        WORK = "work", "Formal work"
        GOLD = "gold", "Hidden gold check"
        QUALIFICATION = "qualification", "Qualification round"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField(help_text="Order in the study (seeded shuffle).")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.WORK)
    expected_label = models.JSONField(
        null=True, blank=True, help_text="Known answer of a gold or qualification item (label kinds)."
    )
    # Post-editing studies (annotation/post_editing.py): the answer shown pre-selected as "a
    # suggested label", {"label": v} or {"position": p}; which judge proposed it is staff's
    # (Study.parameters["post_editing"]), never part of the item.
    proposal = models.JSONField(null=True, blank=True, help_text="A proposed answer shown pre-selected.")
    # Stored for the data manager's status and agreement filters; every judgment write recounts
    # them in its transaction (annotation/services/live_counts.py).
    live_judgments = models.PositiveIntegerField(default=0, help_text="Judgments not voided.")
    live_answers = models.PositiveIntegerField(
        default=0, help_text="Different answers among the live judgments (0 in a preference study)."
    )

    class Meta:
        ordering = ["study_id", "position"]
        constraints = [models.UniqueConstraint(fields=["study", "position"], name="item_unique_position")]


class ItemCandidate(models.Model):
    """A candidate as shown. `is_gold`, `source_run` and `source_rank` are staff-only."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="candidates")
    passage = models.ForeignKey(Passage, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField(help_text="0-based display position.")
    is_gold = models.BooleanField(default=False)
    source_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    source_rank = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["item_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "position"], name="candidate_unique_position"),
            models.UniqueConstraint(fields=["item", "passage"], name="candidate_unique_passage"),
        ]


class Pool(models.Model):
    """How a relevance study's (query, passage) pairs are chosen from several runs: the strategy
    (annotation/pooling.py), its settings, the runs pooled in the order that breaks ties, the
    queries in the study's seeded order, and the state of the adaptive strategy. Staff-only, like
    ItemCandidate's source run and rank: no annotator-facing selector reads it."""

    class Strategy(models.TextChoices):
        DEPTH = "depth", "Depth: every run's top k"
        RRF = "rrf", "Reciprocal-rank fusion"
        RBP = "rbp", "Rank-biased precision"
        MTF = "mtf", "Move-to-front (adaptive)"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="pool")
    strategy = models.CharField(max_length=10, choices=Strategy.choices)
    depth = models.PositiveIntegerField(help_text="How far down each run is read.")
    budget = models.PositiveIntegerField(null=True, blank=True, help_text="Most pairs judged in all; empty: no limit.")
    budget_per_query = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most pairs judged per query; empty: no limit."
    )
    rrf_k = models.PositiveIntegerField(default=60)
    rbp_p = models.FloatField(default=0.8)
    lookahead = models.PositiveSmallIntegerField(
        default=1, help_text="Move-to-front: undecided pairs kept open for annotators ahead of the judgments."
    )
    runs = models.JSONField(default=list, help_text="Run ids in pooled order: creation's, then each extension's.")
    queries = models.JSONField(default=list, help_text="Query ids in the study's seeded order.")
    state = models.JSONField(default=dict, blank=True, help_text="Move-to-front: priorities and the turn.")
    events = models.PositiveIntegerField(default=0, help_text="Counter numbering move-to-front draws and decisions.")
    extensions = models.PositiveSmallIntegerField(default=0, help_text="Runs added after creation, in steps.")


class PooledPair(models.Model):
    """A (query, passage) pair one of the pool's runs retrieved within its depth, judged or not:
    how it entered the pool (its runs' ranks in `hits`, its fusion score, its place in the
    strategy's order, the extension step that brought it, the run whose turn drew it) and, once
    drawn, the item that asks for it. Staff-only."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="pairs")
    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="+")
    passage = models.ForeignKey(Passage, on_delete=models.PROTECT, related_name="+")
    item = models.OneToOneField(Item, null=True, blank=True, on_delete=models.CASCADE, related_name="pooled_pair")
    score = models.FloatField(null=True, blank=True, help_text="Fusion score (rrf, rbp).")
    order = models.PositiveIntegerField(
        null=True, blank=True, help_text="Place in the strategy's order; move-to-front: the event that drew it."
    )
    pool_position = models.PositiveIntegerField(
        null=True, blank=True, help_text="Its place in the query's own pool, when that pool was added."
    )
    drawn_from = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    decided = models.PositiveIntegerField(null=True, blank=True, help_text="Move-to-front: the event that decided it.")
    relevant = models.BooleanField(null=True, blank=True, help_text="Move-to-front: the outcome it was decided with.")
    extension = models.PositiveSmallIntegerField(default=0, help_text="0: in the pool from creation; n: the nth step.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pool", "query", "passage"], name="pooled_pair_unique")]
        indexes = [models.Index(fields=["pool", "query"])]


class PoolHit(models.Model):
    """One run's rank of a pooled pair (every run that retrieved it within the depth, the runs
    added later included)."""

    pair = models.ForeignKey(PooledPair, on_delete=models.CASCADE, related_name="hits")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    rank = models.PositiveIntegerField()
    extension = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["pair_id", "id"]
        constraints = [models.UniqueConstraint(fields=["pair", "run"], name="pool_hit_unique")]
        indexes = [models.Index(fields=["run", "rank"])]


LIVE_ASSIGNMENT_STATES = ("active", "submitted")


class Assignment(models.Model):
    """A claim on one of an item's judgment slots (0 .. judgments_per_item - 1).

    The (item, slot) uniqueness over live assignments is what makes over-assignment impossible
    even when two requests race: the database refuses the second claim of the same slot. An
    expired claim, or the assignment of a voided judgment, frees its slot for someone else.
    Imported judgments hold slots too, so every judgment of an item is counted the same way.
    """

    class State(models.TextChoices):
        ACTIVE = "active"
        SUBMITTED = "submitted"
        EXPIRED = "expired"
        VOIDED = "voided"
        SKIPPED = "skipped"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    slot = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.ACTIVE)
    claimed_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["item", "slot"],
                condition=Q(state__in=LIVE_ASSIGNMENT_STATES),
                name="assignment_unique_live_slot",
            ),
            models.UniqueConstraint(
                fields=["item", "annotator"],
                condition=Q(state__in=LIVE_ASSIGNMENT_STATES),
                name="assignment_unique_live_annotator",
            ),
        ]
        indexes = [models.Index(fields=["annotator", "state"])]


VOID_FIELDS = frozenset({"voided", "void_reason", "voided_by", "voided_at"})


# The time a judgment took as the quality page measures it: the client's, else the server's.
TIME_TAKEN = Coalesce("seconds", "server_seconds")


class Judgment(models.Model):
    """What an annotator answered. Written once, then changed only by staff voiding it (kept,
    excluded) or, where the study allows revisions, by its annotator revising it through
    annotation.services.revisions, which first keeps the answer it replaces as a
    JudgmentRevision: never a silent change. The row always holds the latest answer
    (`revision` counts them, 1 = never revised), so statistics and exports read the latest.

    `seconds` is what the client reported (clamped), `server_seconds` the time the server saw
    between the claim and the submission; the two disagree when a tab sat open or a client lies.

    `study` and `item_role` copy the item's study and role when the judgment is written
    (`copy_item_fields`: `save` calls it, bulk writers call it themselves) and never change: an
    item never leaves its study, and only items nobody has judged or claimed change role
    (quality.designate_items). With them the staff pages' per-annotator counts and exact median
    seconds are read from the indexes below alone, without joining 300K judgments to their items
    and sorting them (1.2-1.6 s per page at 100K items on SQLite).
    """

    class Source(models.TextChoices):
        WEB = "web"
        IMPORT = "import"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="judgments")
    study = models.ForeignKey(  # the item's (see above); the indexes below lead with it
        Study, on_delete=models.CASCADE, related_name="+", db_index=False, editable=False
    )
    item_role = models.CharField(max_length=20, choices=Item.Role.choices, editable=False)  # the item's
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments")
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="judgment"
    )
    choice = models.ForeignKey(ItemCandidate, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    label = models.JSONField(null=True, blank=True)
    spans = models.JSONField(default=list, blank=True)
    selections = models.JSONField(default=list, blank=True, help_text="Positions chosen in a multi-select item.")
    rubric = models.JSONField(default=dict, blank=True)
    rationale = models.TextField(blank=True)
    unsure = models.BooleanField(default=False, help_text="The annotator marked the answer as a guess.")
    shown_order = models.JSONField(
        null=True,
        blank=True,
        help_text="The item positions of the candidates in the order this annotator saw them (first shown "
        "first); null: not recorded (imported judgments, judgments from before it was recorded).",
    )
    proposal_shown = models.BooleanField(default=False, help_text="A proposed answer was shown pre-selected.")
    proposal_kept = models.BooleanField(
        null=True, blank=True, help_text="The answer is the proposal (None: no proposal was shown)."
    )
    seconds = models.FloatField(null=True, blank=True)
    server_seconds = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.WEB)
    submitted_at = models.DateTimeField(auto_now_add=True)
    voided = models.BooleanField(default=False)
    void_reason = models.TextField(blank=True)
    voided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    voided_at = models.DateTimeField(null=True, blank=True)
    revision = models.PositiveSmallIntegerField(default=1, help_text="Which answer this is: 1 = never revised.")
    revised_at = models.DateTimeField(null=True, blank=True, help_text="When the latest revision was given.")

    class Meta:
        ordering = ["item_id", "submitted_at"]
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="judgment_unique_per_annotator")]
        # The staff pages' per-annotator figures, read from these alone: each lists the columns its
        # queries read, so SQLite never visits the table, and a median is an ORDER BY the index
        # already has (over live judgments: `NOT voided` is not an equality, which would end the
        # usable part of an index; partial indexes hold the live ones only).
        indexes = [
            # The study page: per annotator, judgments done and worked and the last one (a seek:
            # submitted_at follows the annotator); the overview's counts.
            models.Index(
                fields=["study", "annotator", "submitted_at", "voided", "seconds", "item_role", "unsure"],
                name="judgment_study_annotator",
            ),
            # The study page: each annotator's median of the client's seconds.
            models.Index(
                fields=["study", "annotator", "seconds"], condition=Q(voided=False), name="judgment_live_seconds"
            ),
            # The quality page: each annotator's counted judgments and median time (the client's,
            # else the server's: TIME_TAKEN) ...
            models.Index(
                F("study"),
                F("item_role"),
                F("annotator"),
                TIME_TAKEN,
                F("seconds"),
                F("server_seconds"),
                F("voided"),
                condition=Q(voided=False),
                name="judgment_counted_by_annotator",
            ),
            # ... and the study's median time over all of them.
            models.Index(
                F("study"),
                F("item_role"),
                TIME_TAKEN,
                F("annotator"),
                condition=Q(voided=False),
                name="judgment_counted_seconds",
            ),
        ]

    def save(self, *args, **kwargs):
        """Refuse to rewrite an answer: after the first save only the void fields may change (a
        revision writes through revisions.revise_judgment, which records the earlier answer)."""
        if self._state.adding:
            self.copy_item_fields()
        update_fields = kwargs.get("update_fields")
        if (
            self.pk is not None
            and not self._state.adding
            and (update_fields is None or not set(update_fields) <= VOID_FIELDS)
        ):
            raise ValueError("a submitted judgment is immutable; only voiding may change it")
        super().save(*args, **kwargs)

    def copy_item_fields(self) -> None:
        """Copy the item's study and role onto the judgment (before it is first written)."""
        self.study_id, self.item_role = self.item.study_id, self.item.role


class JudgmentRevision(models.Model):
    """An answer its annotator later revised, kept as it was: answer number `number` of the
    judgment (1 = the first answer), when it was given and when and by whom it was replaced.
    Only staff read these (the item's detail in the data manager)."""

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveSmallIntegerField()
    choice = models.ForeignKey(ItemCandidate, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    label = models.JSONField(null=True, blank=True)
    spans = models.JSONField(default=list, blank=True)
    selections = models.JSONField(default=list, blank=True)
    rubric = models.JSONField(default=dict, blank=True)
    rationale = models.TextField(blank=True)
    unsure = models.BooleanField(default=False)
    answered_at = models.DateTimeField(help_text="When this answer was given.")
    replaced_at = models.DateTimeField(auto_now_add=True)
    replaced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["judgment_id", "number"]
        constraints = [models.UniqueConstraint(fields=["judgment", "number"], name="judgment_revision_unique_number")]


class ItemFlag(models.Model):
    """An annotator's report that an item is broken or unanswerable, for staff to look at.
    One per annotator and item (the first reason stands); only staff read them."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="flags")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="item_flags")
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "created_at"]
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="item_flag_unique_per_annotator")]


class AnnotatorProfile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotator_profile")
    expertise = models.CharField(max_length=300, blank=True)
    books_read = models.TextField(blank=True)
    blocked = models.BooleanField(default=False)
    blocked_reason = models.TextField(blank=True)
    # Invited and crowd accounts exist for the studies they were given (StudyGrant), until staff
    # widen them; lab accounts (off) may also work on every study open to all annotators.
    only_granted = models.BooleanField(
        default=False,
        help_text="Works only on the studies granted to it (invited accounts, crowd participants).",
    )

    def __str__(self):
        return f"profile of {self.user}"


class StudyGrant(models.Model):
    """Access to one study given to one account personally: by an invitation, a crowd link or
    staff. A grant lets the account in even where the study names its annotators (the names
    narrow who else may come, never whom staff invited), and may carry the account's own quota
    there (a crowd participant's: their link's, which integrations keeps in step)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="grants")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_grants")
    item_quota = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most formal items this account may judge here, besides the study's cap; empty: none of its own.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "annotator"], name="study_grant_unique_per_account")]


class QualificationAttempt(models.Model):
    """One pass through a study's qualification items by one annotator."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="qualification_attempts_made")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    correct = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    passed = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["study_id", "annotator_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "annotator", "number"], name="qualification_attempt_unique")
        ]


class QualificationAnswer(models.Model):
    """An answer in a qualification round: kept apart from judgments, so retries are possible and
    formal statistics never see practice answers."""

    attempt = models.ForeignKey(QualificationAttempt, on_delete=models.CASCADE, related_name="answers")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    choice = models.ForeignKey(ItemCandidate, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    label = models.JSONField(null=True, blank=True)
    selections = models.JSONField(default=list, blank=True)
    correct = models.BooleanField()
    answered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attempt", "item"], name="qualification_answer_unique")]


class StudyBlock(models.Model):
    """An annotator blocked from one study: no more work there, and (by default) their
    judgments left out of its statistics. `AnnotatorProfile.blocked` blocks everywhere."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="blocks")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_blocks")
    reason = models.TextField()
    exclude_judgments = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "annotator"], name="study_block_unique")]


class AnnotatorFlag(models.Model):
    """An automatic warning about an annotator in a study, for staff to act on."""

    class Reason(models.TextChoices):
        LOW_GOLD_ACCURACY = "low_gold_accuracy", "Gold accuracy below threshold"
        TOO_FAST = "too_fast", "Implausibly fast answers"
        LOW_PEER_PASS_RATE = "low_peer_pass_rate", "Peer-review pass rate below target"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="flags")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="flags")
    reason = models.CharField(max_length=30, choices=Reason.choices)
    value = models.FloatField()
    threshold = models.FloatField()
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "annotator", "reason"], condition=Q(resolved_at__isnull=True), name="flag_unique_open"
            )
        ]


class PeerReview(models.Model):
    """A second annotator's verdict on a sampled judgment (PlotRetrieval's validation step)."""

    class Verdict(models.TextChoices):
        PASS = "pass", "Correct"
        FAIL = "fail", "Incorrect"

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="peer_reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="peer_reviews")
    verdict = models.CharField(max_length=10, choices=Verdict.choices, null=True, blank=True)  # noqa: DJ001 - None: not reviewed yet
    comment = models.TextField(blank=True)
    assigned_at = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["judgment", "reviewer"], name="peer_review_unique")]


class Adjudication(models.Model):
    """An adjudicator's final answer for an item (usually one the annotators disagreed on): it
    becomes the item's label in every export. `reason` is the entry of the study's error list
    the adjudicator chose, as it read then."""

    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="adjudication")
    choice = models.ForeignKey(ItemCandidate, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    label = models.JSONField(null=True, blank=True)
    selections = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=200, blank=True)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # Staff adjudicate anyway; an account with this permission (given in the admin, to a
        # user or a group) reaches the adjudication workspace and nothing else staff see.
        permissions = [("adjudicate", "May adjudicate items in the adjudication workspace")]


class AdjudicationReason(models.Model):
    """One entry of an error list adjudicators choose from when they decide or send an item
    back. Entries with a study make that study's own list; entries without one make the global
    list, which studies without their own use (annotation.services.adjudication: the default
    list when staff stored none)."""

    study = models.ForeignKey(
        Study, null=True, blank=True, on_delete=models.CASCADE, related_name="adjudication_reasons"
    )
    text = models.CharField(max_length=200)
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["study_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "text"], name="adjudication_reason_unique_text"),
            models.UniqueConstraint(
                fields=["text"], condition=Q(study__isnull=True), name="adjudication_reason_unique_global_text"
            ),
        ]


class Rework(models.Model):
    """An item an adjudicator sent back for a fresh round of judgments: the judgments it had then
    were voided (kept, no longer counted, their slots freed) and any decision withdrawn, both
    recorded here with the reason."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reworks")
    reason = models.CharField(max_length=200)
    note = models.TextField(blank=True)
    judgments = models.JSONField(default=list, help_text="Ids of the judgments this send-back voided.")
    withdrawn_decision = models.JSONField(null=True, blank=True, help_text="The decision it replaced, if any.")
    sent_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "sent_at", "pk"]


class AdjudicationQueue(models.Model):
    """A study's adjudication queue: what its stored order was last built from, so a page can tell
    in a few cheap statements whether it still holds (annotation.services.adjudication). Ordering
    items by agreement reads every counted judgment, too slow for each page at 100K items; the
    entries keep the order instead, and follow each change of the judgments item by item
    (AdjudicationChange), so only a new seed or new exclusions build it afresh."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="adjudication_queue")
    last_judgment = models.BigIntegerField(
        default=0, help_text="The largest judgment id when the entries last followed the study's judgments."
    )
    excluded = models.JSONField(default=list, help_text="Annotators whose judgments were excluded then.")
    sample_rate = models.FloatField(default=0.0)
    seed = models.IntegerField(default=0)
    stale = models.BooleanField(default=False, help_text="A judgment was voided since the entries last followed.")
    built_at = models.DateTimeField(auto_now=True, help_text="When the queue was last built afresh.")
    disputed = models.PositiveIntegerField(default=0)
    sampled = models.PositiveIntegerField(default=0)


class AdjudicationQueueEntry(models.Model):
    """One item of a study's adjudication queue. `rank` orders the entries: it is the item's
    agreement and study position in one number (annotation.services.adjudication.queue_rank), so
    an entry's rank depends on nothing but its own item and never shifts when others come or go."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="adjudication_entry")
    rank = models.PositiveBigIntegerField(help_text="Sort key: agreement, then study position.")
    agreement = models.FloatField()
    judgments = models.PositiveSmallIntegerField()
    sampled = models.BooleanField(default=False, help_text="An agreed item drawn for a check.")
    reworked = models.BooleanField(default=False, help_text="Its new round after being sent back.")

    class Meta:
        ordering = ["study_id", "rank"]
        constraints = [models.UniqueConstraint(fields=["study", "rank"], name="adjudication_entry_unique_rank")]
        # Following a change counts the disputed entries and reads the sampled ones: from these,
        # not from every entry of the study.
        indexes = [
            models.Index(fields=["study", "agreement"], name="adjudication_entry_agreement"),
            models.Index(fields=["study"], condition=models.Q(sampled=True), name="adjudication_entry_sampled"),
        ]


class AgreedItem(models.Model):
    """A work item of a study with an adjudication queue whose two or more counted judgments all
    give the same answer (agreement 1) and that was never sent back: the items the queue's sample
    is drawn from, with each one's place in the seeded draw, so a new count of agreed items redraws
    the sample from an index instead of from every judgment."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+", db_index=False)
    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="+")
    judgments = models.PositiveSmallIntegerField()
    sample_key = models.BinaryField(
        max_length=32, help_text="SHA-256 of 'seed:adjudication-sample:item id': the smallest are drawn first."
    )

    class Meta:
        indexes = [models.Index(fields=["study", "sample_key"], name="agreed_item_draw")]


class AdjudicationChange(models.Model):
    """A work item whose judgments changed (one added, voided, undone, revised or imported) since
    its study's adjudication queue last followed it. Every writer of judgments adds one in its own
    transaction (annotation.services.live_counts), so the mark commits with the change; the queue
    reads the marks, follows their items and deletes exactly the marks it read."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+", db_index=False)


class PreferenceQuery(models.Model):
    """One query of a preference study whose pairs are chosen as judgments land (an adaptive
    design): its pool, how far the procedure has gone and what it found. Rows are locked while a
    judgment advances them (annotation.services.preference_scheduling), so two annotators finishing
    a stage at once open the next stage once, and the budget is counted under the lock."""

    class Status(models.TextChoices):
        OPEN = "open", "Asking"
        DONE = "done", "Finished"
        BUDGET = "budget", "Stopped: budget spent"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="preference_queries")
    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="+")
    pool = models.JSONField(default=list, help_text="Passage ids of the query's candidates, in the seeded pool order.")
    contenders = models.JSONField(default=list, help_text="Passage ids still in contention (top-k procedure).")
    stage = models.PositiveIntegerField(default=0, help_text="Stages opened so far (top-k procedure).")
    stage_pairs = models.JSONField(
        default=list, help_text="The current stage's pairs [[passage id, passage id], ...], smaller id first."
    )
    stage_cut = models.BooleanField(default=False, help_text="The current stage was cut short by the budget.")
    pairs = models.PositiveIntegerField(default=0, help_text="Pairs materialised as items so far (the budget's count).")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    found = models.JSONField(default=list, help_text="The procedure's top passages, best first: [[passage id, wins]].")
    moved_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When judgments last chose new pairs (answers before it may no longer be undone).",
    )

    class Meta:
        ordering = ["study_id", "pk"]
        constraints = [models.UniqueConstraint(fields=["study", "query"], name="preference_query_unique")]
