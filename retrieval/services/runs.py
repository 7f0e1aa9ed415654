"""Runs: a retriever applied to a collection's queries, ranked per candidate set and stored.

Every retriever goes through the same ranking: a stable sort by descending score (ties keep the
candidate set's order), the top `depth` hits stored, and each query's relevant passages ranked
exactly over the whole candidate set, so mean rank and recall stay exact beyond the depth.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from jobs.progress import Progress, no_progress, throttled
from jobs.services import create_job, dispatch
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Scorer, cached_term_counts, validate_parameters
from retrieval.errors import InputError
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Hit, Qrel, Retriever, Run, RunQuery
from retrieval.scoring import Scorer, query_text

from .candidates import CandidateSet, PassageRow, candidate_sets

DEFAULT_CONTEXT = (4, 4)
DEFAULT_DEPTH = 100
# Score matrices are computed for at most this many (query, passage) cells at a time (64 MB).
MAX_SCORE_CELLS = 1 << 23


def parse_context(value: str, field: str = "context") -> tuple[int, int]:
    """ "L/R" (sentences of context left and right of the mask, e.g. "4/4") as two integers."""
    left, separator, right = str(value).partition("/")
    if not separator or not left.strip().isdecimal() or not right.strip().isdecimal():
        raise InputError(f"expected L/R with two whole numbers such as 4/4, got {value!r}", field=field)
    return int(left), int(right)


def get_or_create_retriever(kind: str, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, model: str = "") -> Retriever:
    """The stored retriever for these settings. BM25 retrievers are named by their parameters;
    dense ones by their model, where `model` may also be the id or name of a registered dense
    retriever (a trained one)."""
    if kind == Retriever.Kind.BM25:
        validate_parameters(k1, b)
        k1, b = float(k1), float(b)
        retriever, _ = Retriever.objects.get_or_create(
            name=f"bm25 k1={k1!r} b={b!r}", defaults={"kind": kind, "parameters": {"k1": k1, "b": b}}
        )
        return retriever
    if kind == Retriever.Kind.DENSE:
        from retrieval.dense import registered_dense_retriever

        registered = registered_dense_retriever(model) if model else None
        if registered:
            return registered
        retriever, _ = Retriever.objects.get_or_create(
            name=f"dense {model or 'default'}"[:200], defaults={"kind": kind, "model_path": model}
        )
        return retriever
    raise InputError(f"unknown retriever kind {kind!r}; use bm25 or dense", field="retriever")


def term_counts_folder() -> Path:
    """Where BM25 keeps candidate sets' term counts (content-addressed, shared by all runs)."""
    return Path(settings.MARGINALIA_DATA_DIR) / "bm25"


def warm_term_counts(collection: Collection) -> int:
    """Tokenise the collection's candidate sets now (after an import), so that its first run
    only loads them. Returns how many sets were counted."""
    sets = candidate_sets(collection)
    for candidate_set in sets:
        cached_term_counts([passage.retrieval_text for passage in candidate_set.passages()], term_counts_folder())
    return len(sets)


def scorer_for(retriever: Retriever) -> Scorer:
    if retriever.kind == Retriever.Kind.BM25:
        parameters = retriever.parameters
        return BM25Scorer(parameters.get("k1", DEFAULT_K1), parameters.get("b", DEFAULT_B), term_counts_folder())
    from retrieval.dense import DenseScorer  # torch loads only for dense runs

    return DenseScorer(retriever)


def create_run(
    collection: Collection,
    retriever: Retriever,
    *,
    context_left: int = DEFAULT_CONTEXT[0],
    context_right: int = DEFAULT_CONTEXT[1],
    depth: int = DEFAULT_DEPTH,
) -> Run:
    """A pending run of `retriever` over the collection's queries. Refused when the collection has
    no queries (there would be nothing to rank for). On a collection whose queries carry no
    context sentences (BEIR, or a book) the context L/R is ignored: stored as null, with a
    warning in `parameters["warnings"]` that the command, the form and the API pass on."""
    if context_left < 0 or context_right < 0:
        raise InputError("context sizes cannot be negative", field="context")
    if depth < 1:
        raise InputError(f"must be at least 1, got {depth}", field="depth")
    if not collection.queries.exists():
        raise InputError(NO_QUERIES.format(name=collection.name), field="collection")
    warnings = []
    if not collection_has_context(collection):
        if context_left or context_right:
            warnings.append(CONTEXT_IGNORED.format(name=collection.name, left=context_left, right=context_right))
        context_left = context_right = None
    parameters = {
        "k1": retriever.parameters.get("k1"),
        "b": retriever.parameters.get("b"),
        "model": retriever.model_path,
        "context_left": context_left,
        "context_right": context_right,
        "depth": depth,
        **({"warnings": warnings} if warnings else {}),
    }
    return Run.objects.create(collection=collection, retriever=retriever, parameters=parameters)


NO_QUERIES = (
    "collection '{name}' has no queries, so a run has nothing to rank for; add queries by importing a RELiC"
    " JSON file (manage.py import_relic) or a BEIR folder with queries.jsonl (manage.py import_beir), from the"
    " command line or as an upload (the dashboard's Upload form, POST /api/uploads/), and run on that collection"
)
CONTEXT_IGNORED = (
    "context {left}/{right} ignored: the queries of collection '{name}' have no context sentences, so they are"
    " used as they are"
)


def collection_has_context(collection: Collection) -> bool:
    """Whether any query carries left or right context sentences (RELiC), which L/R then trims."""
    return collection.queries.exclude(left_context=[], right_context=[]).exists()


def ranking(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indexes of the top `depth` scores, best first; equal scores keep their index order. Only
    the scores that can reach the top are sorted."""
    depth = min(depth, len(scores))
    if depth == 0:
        return np.zeros(0, dtype=np.int64)
    threshold = np.partition(scores, len(scores) - depth)[len(scores) - depth]
    contenders = np.flatnonzero(scores >= threshold)
    return contenders[np.argsort(-scores[contenders], kind="stable")][:depth]


def rank_of(scores: np.ndarray, index: int) -> int:
    """The 1-based rank `ranking` gives candidate `index`, counted over every candidate."""
    score = scores[index]
    return int(np.count_nonzero(scores > score) + np.count_nonzero(scores[:index] == score)) + 1


def _relevant_passages(run: Run) -> dict[int, list[int]]:
    relevant: dict[int, list[int]] = {}
    for query_id, passage_id in Qrel.objects.filter(query__collection=run.collection, relevance__gt=0).values_list(
        "query_id", "passage_id"
    ):
        relevant.setdefault(query_id, []).append(passage_id)
    return relevant


def _insert_hits(rows: list[tuple[int, int, int, int, float]]) -> None:
    """One executemany instead of bulk_create: building a model instance per hit costs more than
    all of BM25's scoring on a collection-wide set."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in ("run_id", "query_id", "passage_id", "rank", "score"))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {quote(Hit._meta.db_table)} ({columns}) VALUES (%s, %s, %s, %s, %s)", rows)


class _RunWriter:
    """Buffers a run's hits and gold ranks and writes them in few transactions: a commit per
    candidate set would cost more than ranking a BIRCO pool."""

    FLUSH_ROWS = 200_000

    def __init__(self):
        self.hit_rows: list[tuple[int, int, int, int, float]] = []
        self.run_queries: list[RunQuery] = []

    def add(self, hit_rows: list[tuple[int, int, int, int, float]], run_queries: list[RunQuery]) -> None:
        self.hit_rows += hit_rows
        self.run_queries += run_queries
        if len(self.hit_rows) >= self.FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        with transaction.atomic():
            _insert_hits(self.hit_rows)
            RunQuery.objects.bulk_create(self.run_queries, batch_size=1000)
        self.hit_rows, self.run_queries = [], []


def _rank_candidate_set(
    run: Run,
    scorer: Scorer,
    candidate_set: CandidateSet,
    relevant: dict[int, list[int]],
    writer: _RunWriter,
    progress: Progress,
) -> None:
    """Score and rank one candidate set's queries; hand their hits and gold ranks to `writer`."""
    parameters = run.parameters
    passages: list[PassageRow] = candidate_set.passages()
    passage_ids = np.fromiter((passage.pk for passage in passages), dtype=np.int64, count=len(passages))
    column_of = {int(passage_id): column for column, passage_id in enumerate(passage_ids.tolist())}
    queries = candidate_set.queries
    batch = max(1, MAX_SCORE_CELLS // max(1, len(passages)))
    for offset in range(0, len(queries), batch):
        chunk = queries[offset : offset + batch]
        texts = [
            query_text(query, parameters["context_left"], parameters["context_right"], scorer.mask_token)
            for query in chunk
        ]
        scores = scorer.score(
            texts,
            passages,
            # Called while this chunk is scored, so it sees this iteration's offset and chunk.
            lambda fraction, message: progress((offset + fraction * len(chunk)) / len(queries), message),  # noqa: B023
        )
        hit_rows, run_queries = [], []
        for query, row in zip(chunk, scores):
            top = ranking(row, parameters["depth"])
            hit_rows.extend(
                zip(
                    [run.pk] * len(top),
                    [query.pk] * len(top),
                    passage_ids[top].tolist(),
                    range(1, len(top) + 1),
                    row[top].tolist(),
                )
            )
            relevant_ranks = {
                str(passage_id): rank_of(row, column_of[passage_id])
                for passage_id in relevant.get(query.pk, [])
                if passage_id in column_of
            }
            run_queries.append(
                RunQuery(
                    run=run,
                    query=query,
                    candidates=len(passages),
                    relevant_ranks=relevant_ranks,
                    gold_rank=min(relevant_ranks.values(), default=None),
                )
            )
        writer.add(hit_rows, run_queries)


def execute_run(run: Run, progress: Progress = no_progress) -> Run:
    """Rank every query of the run's collection and store hits and gold ranks. `run.seconds` is
    the wall time of all of it (loading, scoring, ranking, storing). Only a pending run can be
    executed (once); a failed run keeps no hits."""
    started = time.perf_counter()
    if not Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(status=Run.Status.RUNNING):
        run.refresh_from_db(fields=["status"])
        raise InputError(f"run {run.pk} is {run.status}; only a pending run can be executed", field="run")
    run.status = Run.Status.RUNNING
    progress = throttled(progress)
    try:
        scorer = scorer_for(run.retriever)
        relevant = _relevant_passages(run)
        sets = candidate_sets(run.collection)
        writer = _RunWriter()
        for number, candidate_set in enumerate(sets):

            def report(fraction: float, message: str, number=number, candidate_set=candidate_set) -> None:
                label = f"set {number + 1}/{len(sets)} ({candidate_set.description})"
                progress((number + fraction) / len(sets), f"{label}: {message}" if message else label)

            report(0.0, "")
            _rank_candidate_set(run, scorer, candidate_set, relevant, writer, report)
        writer.flush()
    except BaseException:
        with transaction.atomic():
            Hit.objects.filter(run=run).delete()
            RunQuery.objects.filter(run=run).delete()
            Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
        run.status = Run.Status.FAILED
        raise
    run.seconds = time.perf_counter() - started
    run.status = Run.Status.DONE
    run.save(update_fields=["seconds", "status"])
    # Evaluated once here, not on every page or API view that shows the run's metrics.
    run.metrics = evaluate_run(run)
    run.save(update_fields=["metrics"])
    progress(1.0, f"{len(sets)} candidate sets ranked")
    return run


def run_summary(run: Run) -> dict:
    return {"run_id": run.pk, "queries": run.query_results.count(), "seconds": run.seconds}


def start_run_async(collection: Collection, retriever: Retriever, *, user=None, **parameters) -> Run:
    """Create the run and its job and send it to a worker: BM25 to the CPU queue, dense to GPU."""
    from retrieval import tasks

    is_bm25 = retriever.kind == Retriever.Kind.BM25
    with transaction.atomic():
        run = create_run(collection, retriever, **parameters)
        job = create_job(
            "retrieve",
            "cpu" if is_bm25 else "gpu",
            {"run_id": run.pk, "collection": collection.name, "retriever": retriever.name, **run.parameters},
            user=user,
        )
        run.job = job
        run.save(update_fields=["job"])
        dispatch(job, tasks.run_bm25 if is_bm25 else tasks.run_dense, run.pk)
    return run
