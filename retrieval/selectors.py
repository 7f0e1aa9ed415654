"""Reads for the staff API and dashboard: collections with their sizes, runs, jobs and retrievers
to show, and qrels and run files as TREC text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from retrieval.errors import InputError
from retrieval.input_rules import parse_id
from retrieval.models import Collection, Document, Hit, Passage, Qrel, Query, Retriever, Run
from retrieval.qrels_sources import rows_for

# The metrics the dashboard shows for a run, in this order, when evaluate_run reports them.
KEY_METRICS = ("recall@1", "recall@10", "recall@100", "mrr@10", "ndcg@10", "mean_rank")


def _count(model, collection_path: str) -> Coalesce:
    """A correlated COUNT per collection. Subqueries, not joins: joining passages to queries would
    multiply rows (a book has tens of thousands of windows)."""
    counted = (
        model.objects.filter(**{collection_path: OuterRef("pk")})
        .order_by()
        .values(collection_path)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def collections_with_counts() -> QuerySet[Collection]:
    return Collection.objects.annotate(
        document_count=_count(Document, "collection"),
        passage_count=_count(Passage, "collection"),
        query_count=_count(Query, "collection"),
        qrel_count=_count(Qrel, "query__collection"),
        run_count=_count(Run, "collection"),
    ).order_by("name")


def runs_for_listing() -> QuerySet[Run]:
    return Run.objects.select_related("retriever", "collection", "job").order_by("-created_at", "-pk")


def retrievers_for_listing() -> QuerySet[Retriever]:
    return Retriever.objects.select_related("trained_on", "training_job").order_by("-created_at", "-pk")


def registered_dense_retriever(model: str) -> Retriever | None:
    """The dense retriever a `--model` value names by id or name (trained models), if any. Here,
    not in retrieval.dense: starting a run or a training asks this in the web request, and
    importing the encoder's module (torch, sentence-transformers) held the browser for 15 s."""
    match = Q(name=model)
    if (model_id := parse_id(model)) is not None:
        match |= Q(pk=model_id)
    return Retriever.objects.filter(match, kind=Retriever.Kind.DENSE).first()


def continuable_retrievers() -> QuerySet[Retriever]:
    """Dense retrievers a training may start from: one model serves queries and passages (a
    training starts both encoders from one model). Their names go in the form's choices."""
    return (
        Retriever.objects.filter(kind=Retriever.Kind.DENSE, query_model_path="").exclude(model_path="").order_by("name")
    )


def default_dense_model_label() -> str:
    """What a dense retriever without a model path uses, in words (retrieval.dense.default_model
    loads it; naming it must not load torch)."""
    return settings.MARGINALIA_DENSE_MODEL or "bundled MiniLM (all-MiniLM-L6-v2)"


def key_metrics(report: dict | None) -> list[float | None]:
    """The KEY_METRICS values of a report, in order; None where the report has no such metric."""
    metrics = report["metrics"] if report else {}
    return [metrics.get(name) for name in KEY_METRICS]


def trec_qrels_lines(collection: Collection) -> Iterator[str]:
    """`qid 0 docid relevance`, the format trec_eval and pytrec_eval read."""
    qrels = (
        Qrel.objects.filter(query__collection=collection)
        .order_by("query__ordinal", "passage__ordinal")
        .values_list("query__external_id", "passage__external_id", "relevance")
    )
    for query_id, passage_id, relevance in qrels.iterator(chunk_size=5000):
        yield f"{query_id} 0 {passage_id} {relevance}\n"


def require_done(run: Run, field: str = "run") -> Run:
    """Refuse a run that did not succeed: a pending or running run has only some of its hits, a
    failed or cancelled one none. Every reader of hits (exports, metrics, studies) asks here."""
    if run.status != Run.Status.DONE:
        raise InputError(f"run {run.pk} is {run.status}, not done: only a finished run's hits can be read", field=field)
    return run


def trec_run_lines(run: Run, queries: QuerySet[Query] | None = None) -> Iterable[str]:
    """The run's hits as TREC run lines, `qid Q0 docid rank score tag`, scores printed exactly
    (shortest round-trip repr); only `queries`' hits when given (a subquery: any number).
    Refuses (InputError) a run that is not done, before any line."""
    require_done(run)
    return _trec_run_lines(run, queries)


def _trec_run_lines(run: Run, queries: QuerySet[Query] | None = None) -> Iterable[str]:
    tag = run.tag
    hits = Hit.objects.filter(run=run)
    if queries is not None:
        hits = hits.filter(query__in=queries.values("pk"))
    hits = hits.order_by("query__ordinal", "query_id", "rank").values_list(
        "query__external_id", "passage__external_id", "rank", "score"
    )
    for query_id, passage_id, rank, score in hits.iterator(chunk_size=10000):
        yield f"{query_id} Q0 {passage_id} {rank} {score!r} {tag}"


def relevant_rank_lines(run: Run, queries: QuerySet[Query] | None = None) -> Iterable[str]:
    """What `evaluate_run` reads beyond the TREC file: one JSON line per query of the run, in
    collection order, with `query` (external id), `candidates` (its candidate set's size),
    `stored_hits` (lines of the TREC file) and `ranks` (each relevant passage of the collection's
    qrels that lies in the candidate set -> its exact rank over the whole set, best first). A
    relevant passage not listed is outside the set: no ranking reaches it. Only `queries`' lines
    when given. Refuses a run that is not done, before any line."""
    require_done(run)
    return _relevant_rank_lines(run, queries)


def _relevant_rank_lines(run: Run, queries: QuerySet[Query] | None = None) -> Iterable[str]:
    hits, results = Hit.objects.filter(run=run), run.query_results.all()
    if queries is not None:
        hits, results = hits.filter(query__in=queries.values("pk")), results.filter(query__in=queries.values("pk"))
    per_query = hits.order_by().values("query_id").annotate(n=Count("pk"))
    stored = {row["query_id"]: row["n"] for row in per_query}
    results = list(
        results.order_by("query__ordinal", "query_id").values_list(
            "query_id", "query__external_id", "candidates", "relevant_ranks"
        )
    )
    passage_ids = {int(pk) for *_, ranks in results for pk in ranks}
    external = dict(rows_for(Passage.objects.all(), "pk", passage_ids, "pk", "external_id"))
    for query_id, query, candidates, ranks in results:
        ordered = sorted(ranks.items(), key=lambda pair: pair[1])
        yield json.dumps(
            {
                "query": query,
                "candidates": candidates,
                "stored_hits": stored.get(query_id, 0),
                "ranks": {external[int(pk)]: rank for pk, rank in ordered},
            },
            ensure_ascii=False,
        )


def get_run(run_id, field: str = "run") -> Run:
    """The run a command or request names, or an InputError naming the field."""
    try:
        return Run.objects.select_related("collection", "retriever").get(pk=int(run_id))
    except (ValueError, TypeError, Run.DoesNotExist):
        raise InputError(f"no run with id {run_id!r}", field=field) from None
