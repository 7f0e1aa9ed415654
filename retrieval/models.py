"""Corpora, queries, ground truth, retrievers and runs.

A `Collection` is what one import produced: one book (RELiC-style, with sentences and n-sentence
windows as passages) or a set of documents (BEIR-style, one passage per document). Every ranking
is computed over a *candidate set*: the windows of one book and one quote length for RELiC, a
query's own `pool` when it has one (BIRCO), else the whole collection.
"""

from django.db import models


class Collection(models.Model):
    class Kind(models.TextChoices):
        BOOK = "book", "Book (sentences and windows)"
        RELIC = "relic", "RELiC books with scholarly contexts"
        BEIR = "beir", "BEIR documents"
        ANSWERS = "answers", "Generated answers (one run per system)"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="Path or URL it was imported from.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Document(models.Model):
    """A book (RELiC, import_book). BEIR corpora have passages without documents."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    external_id = models.CharField(max_length=300)
    title = models.CharField(max_length=500)
    author = models.CharField(max_length=300, blank=True)
    ordinal = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["collection_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "external_id"], name="document_unique_external_id")
        ]

    def __str__(self):
        return self.title


class Sentence(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="sentences")
    index = models.PositiveIntegerField()
    text = models.TextField()

    class Meta:
        ordering = ["document_id", "index"]
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="sentence_unique_index")]


class Passage(models.Model):
    """A retrievable unit. For books: `length` consecutive sentences starting at `start`.

    `ordinal` is the import order inside the collection; rankings break score ties by it (or by
    pool order when the query has a pool).
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="passages")
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.CASCADE, related_name="passages")
    external_id = models.CharField(max_length=300)
    title = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    start = models.PositiveIntegerField(null=True, blank=True, help_text="First sentence index (books).")
    length = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Number of sentences (books).")
    ordinal = models.PositiveIntegerField()

    class Meta:
        ordering = ["collection_id", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["collection", "external_id"], name="passage_unique_external_id")]
        indexes = [models.Index(fields=["document", "length", "start"])]

    def __str__(self):
        return self.external_id

    @property
    def retrieval_text(self) -> str:
        """The text that retrievers index: BEIR's "title text" convention when there is a title."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


class Query(models.Model):
    """A retrieval query: plain text (BEIR) or a masked quotation's left/right context (RELiC).

    RELiC queries point at their book (`document`) and carry the gold quote's `quote_length`, which
    selects the candidate set of that book's windows of the same length.
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="queries")
    external_id = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    left_context = models.JSONField(default=list, blank=True)
    right_context = models.JSONField(default=list, blank=True)
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.CASCADE, related_name="queries")
    quote_length = models.PositiveSmallIntegerField(null=True, blank=True)
    split = models.CharField(max_length=20, default="test")
    metadata = models.JSONField(default=dict, blank=True)
    ordinal = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["collection_id", "ordinal"]
        verbose_name_plural = "queries"
        constraints = [models.UniqueConstraint(fields=["collection", "external_id"], name="query_unique_external_id")]

    def __str__(self):
        return self.external_id

    @property
    def has_context(self) -> bool:
        return bool(self.left_context or self.right_context)


class PoolEntry(models.Model):
    """One passage of a query's own candidate pool (BIRCO), in the pool's given order."""

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="pool_entries")
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["query_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["query", "passage"], name="pool_unique_passage"),
            models.UniqueConstraint(fields=["query", "position"], name="pool_unique_position"),
        ]


class Qrel(models.Model):
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="qrels")
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="qrels")
    relevance = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["query", "passage"], name="qrel_unique_pair")]


class Retriever(models.Model):
    """A configured retriever. Trained dense models point at their artifact folder."""

    class Kind(models.TextChoices):
        BM25 = "bm25", "BM25 (Okapi)"
        DENSE = "dense", "Dense (sentence-transformers)"
        IMPORTED = "imported", "Imported (a ranking made elsewhere)"
        HUMAN = "human", "Human ranking (a preference study's scores)"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    parameters = models.JSONField(default=dict, blank=True)
    model_path = models.CharField(max_length=1000, blank=True, help_text="Model name or folder (dense).")
    query_model_path = models.CharField(
        max_length=1000, blank=True, help_text="Separate query encoder (asymmetric dense); empty: shared."
    )
    trained_on = models.ForeignKey(Collection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    training_job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class Run(models.Model):
    """One retriever applied to one collection's queries. `parameters` holds k1, b, context L/R
    and depth as used, so a run can always be reproduced."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    retriever = models.ForeignKey(Retriever, on_delete=models.PROTECT, related_name="runs")
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(
        max_length=200, blank=True, help_text="A run's name in its collection (imported runs); empty: unnamed."
    )
    parameters = models.JSONField(default=dict)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    seconds = models.FloatField(null=True, blank=True)
    metrics = models.JSONField(
        null=True,
        blank=True,
        help_text="evaluate_run's report, stored when the run finished (hits and qrels no longer change).",
    )
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "name"], condition=~models.Q(name=""), name="run_unique_name_per_collection"
            )
        ]

    def __str__(self):
        return f"run {self.pk}: {self.name or self.retriever} on {self.collection}"

    @property
    def tag(self) -> str:
        return f"marginalia-{self.retriever.kind}-{self.pk}"


class RunQuery(models.Model):
    """Per query of a run: the size of its candidate set and the exact rank of its best-ranked
    relevant passage, so mean rank stays exact beyond the stored depth."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="query_results")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    candidates = models.PositiveIntegerField()
    gold_rank = models.PositiveIntegerField(null=True, blank=True)
    relevant_ranks = models.JSONField(default=dict, blank=True, help_text="passage id -> rank, all relevant.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "query"], name="runquery_unique")]


class Hit(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="hits")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="+")
    rank = models.PositiveIntegerField()
    score = models.FloatField()

    class Meta:
        ordering = ["run_id", "query_id", "rank"]
        constraints = [models.UniqueConstraint(fields=["run", "query", "rank"], name="hit_unique_rank")]
