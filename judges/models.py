"""Judges: named, versioned configurations that answer a study's items the way an annotator
would, and their answers.

A judge's answers are never `Judgment`s: they live in `JudgeAnswer`, which no annotator-facing
selector reads, so statistics over humans stay human and an annotator never sees what a model
said. A `Judge` row is one version: changing a judge's settings makes a new version, so stored
answers always say exactly which configuration gave them.
"""

from django.conf import settings as django_settings
from django.db import models
from django.db.models import Q

from annotation.models import Item
from outbound.fields import SealedField
from retrieval.models import Passage, Query


class Judge(models.Model):
    class Backend(models.TextChoices):
        RUN = "run", "A retrieval run's scores"
        LOCAL = "local", "A model loaded from disk by the worker"
        OPENAI = "openai", "An OpenAI-compatible chat endpoint"

    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    backend = models.CharField(max_length=10, choices=Backend.choices)
    # model / gguf_file, base_url, api_key_secret (the NAME of a JudgeSecret, never the key) or
    # api_key_env (the name of an allowed environment variable), temperature, seed, max_tokens,
    # concurrency, batch_size, retries, timeout, run (for the run backend).
    settings = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="judge_unique_version")]
        # Staff run judges; pointing one at an endpoint, with a key, takes this as well.
        permissions = [
            (
                "manage_judge_endpoints",
                "Can register judges that call an endpoint, change their endpoint, and manage judge secrets",
            )
        ]

    def __str__(self):
        return f"{self.name} v{self.version}"

    @property
    def queue(self) -> str:
        """Local models run where the GPU is; endpoints and runs only wait on the network or the
        database, for as long as a study takes, so on the "long" queue, never ahead of short work."""
        return "gpu" if self.backend == self.Backend.LOCAL else "long"


class JudgeSecret(models.Model):
    """A named API key for judges (`settings.api_key_secret` names it), registered by staff who
    hold judges.manage_judge_endpoints. The key is sealed (outbound.sealing) and write-only: no
    page, API, export or error shows it again, only `hint` (its last characters)."""

    name = models.CharField(max_length=64, unique=True)
    sealed_value = SealedField()
    hint = models.CharField(max_length=8, blank=True)
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class JudgeAnswer(models.Model):
    """One answer of one judge version to one prompt: a study item (sample `sample` of N), or a
    (query, passage) pair scored for a rerank. The unique keys are the cache: the same judge
    version, prompt and item (or pair) are never asked twice."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="answers")
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_answers")
    query = models.ForeignKey(Query, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    passage = models.ForeignKey(Passage, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    sample = models.PositiveSmallIntegerField(default=0)
    prompt_hash = models.CharField(max_length=64)
    raw_response = models.TextField(blank=True)
    # {"position": p} (proxy), {"label": v} (relevance, quotability), {"score": s} (runs, reranks).
    parsed = models.JSONField(null=True, blank=True)
    failure_reason = models.CharField(max_length=300, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["judge_id", "item_id", "sample"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "prompt_hash", "item", "sample"],
                condition=Q(item__isnull=False),
                name="judge_answer_cached_per_item",
            ),
            models.UniqueConstraint(
                fields=["judge", "prompt_hash", "query", "passage", "sample"],
                condition=Q(item__isnull=True),
                name="judge_answer_cached_per_pair",
            ),
        ]

    @property
    def failed(self) -> bool:
        return self.parsed is None
