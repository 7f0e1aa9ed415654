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
from django.utils import timezone

from jobs.errors import JobCancelled
from jobs.models import Job
from jobs.progress import Progress, no_progress, throttled
from jobs.services import create_job, dispatch_children, finish_job
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Scorer, cached_term_counts, validate_parameters, worth_caching
from retrieval.errors import InputError
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Hit, Qrel, Retriever, Run, RunQuery
from retrieval.planner import refresh_statistics
from retrieval.scoring import Scorer, query_text
from retrieval.selectors import registered_dense_retriever

from .candidates import CandidateSet, PassageRow, candidate_sets
from .run_status import delete_results, settle_run

DEFAULT_CONTEXT = (4, 4)
DEFAULT_DEPTH = 100
# Score matrices are computed for at most this many (query, passage) cells at a time (64 MB by
# default; MARGINALIA_SCORE_CELLS bounds the memory of one batch, on a GPU too).
MAX_SCORE_CELLS = settings.MARGINALIA_SCORE_CELLS


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
    only loads them; sets too small to be worth caching are left to the run. Returns how many
    sets were counted."""
    sets = [candidate_set for candidate_set in candidate_sets(collection) if worth_caching(candidate_set.size())]
    for candidate_set in sets:
        cached_term_counts([passage.retrieval_text for passage in candidate_set.passages()], term_counts_folder())
    return len(sets)


def scorer_for(retriever: Retriever, run_parameters: dict | None = None) -> Scorer:
    """The scorer of a retriever; a dense one takes the run's prompts (None: the model's own)."""
    if retriever.kind == Retriever.Kind.BM25:
        parameters = retriever.parameters
        return BM25Scorer(parameters.get("k1", DEFAULT_K1), parameters.get("b", DEFAULT_B), term_counts_folder())
    from retrieval.dense import DenseScorer  # torch loads only for dense runs

    run_parameters = run_parameters or {}
    return DenseScorer(retriever, run_parameters.get("query_prompt"), run_parameters.get("passage_prompt"))


def create_run(
    collection: Collection,
    retriever: Retriever,
    *,
    context_left: int = DEFAULT_CONTEXT[0],
    context_right: int = DEFAULT_CONTEXT[1],
    depth: int = DEFAULT_DEPTH,
    query_prompt: str | None = None,
    passage_prompt: str | None = None,
) -> Run:
    """A pending run of `retriever` over the collection's queries. Refused when the collection has
    no queries (there would be nothing to rank for). On a collection whose queries carry no
    context sentences (BEIR, or a book) the context L/R is ignored: stored as null, with a
    warning in `parameters["warnings"]` that the command, the form and the API pass on. Dense
    runs take prompts put before each query and passage text (None: the model's own
    sentence-transformers prompts, "" none); BM25 ignores them."""
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
    if retriever.kind == Retriever.Kind.DENSE:
        parameters.update(query_prompt=query_prompt, passage_prompt=passage_prompt)
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


def relevant_passages(collection: Collection) -> dict[int, list[int]]:
    """Query id -> ids of its passages with relevance > 0."""
    relevant: dict[int, list[int]] = {}
    for query_id, passage_id in Qrel.objects.filter(query__collection=collection, relevance__gt=0).values_list(
        "query_id", "passage_id"
    ):
        relevant.setdefault(query_id, []).append(passage_id)
    return relevant


def insert_hits(rows: list[tuple[int, int, int, int, float]]) -> None:
    """The fastest bulk insert each database offers, without building a model instance per hit
    (that costs more than all of BM25's scoring on a collection-wide set): COPY on Postgres
    (psycopg 3 sends floats exactly, as their shortest repr), one executemany elsewhere."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in ("run_id", "query_id", "passage_id", "rank", "score"))
    table = quote(Hit._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s)", rows)


class RunWriter:
    """Buffers a run's hits and gold ranks and writes them in few transactions: a commit per
    candidate set would cost more than ranking a BIRCO pool. The buffer is bounded, so memory
    stays bounded by FLUSH_ROWS, not by the run or the shard."""

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
            insert_hits(self.hit_rows)
            RunQuery.objects.bulk_create(self.run_queries, batch_size=1000)
        self.hit_rows, self.run_queries = [], []


def _query_batch(candidate_set: CandidateSet, passages: int) -> int:
    """How many of the set's queries are scored at once: a score matrix of at most
    MAX_SCORE_CELLS cells. Shards split a set only at multiples of it, so a sharded run scores
    exactly the batches the run in one piece scores."""
    return max(1, MAX_SCORE_CELLS // max(1, passages))


def _rank_candidate_set(
    run: Run,
    scorer: Scorer,
    candidate_set: CandidateSet,
    relevant: dict[int, list[int]],
    writer: RunWriter,
    progress: Progress,
) -> None:
    """Score and rank one candidate set's queries; hand their hits and gold ranks to `writer`.
    Progress (the job's heartbeat) is reported after every batch of queries."""
    parameters = run.parameters
    passages: list[PassageRow] = candidate_set.passages()
    passage_ids = np.fromiter((passage.pk for passage in passages), dtype=np.int64, count=len(passages))
    column_of = {int(passage_id): column for column, passage_id in enumerate(passage_ids.tolist())}
    queries = candidate_set.queries
    batch = _query_batch(candidate_set, len(passages))
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
        done = offset + len(chunk)
        progress(done / len(queries), f"{done}/{len(queries)} queries")


# A piece of a run: (candidate set index, first query, end query) over candidate_sets(collection).
Piece = tuple[int, int, int]


def _whole(sets: list[CandidateSet]) -> list[Piece]:
    return [(number, 0, len(candidate_set.queries)) for number, candidate_set in enumerate(sets)]


def _set_size(candidate_set: CandidateSet) -> int:
    return len(candidate_set.pool) if candidate_set.pool is not None else candidate_set.queryset.count()


def plan_shards(sets: list[CandidateSet], shards: int) -> list[list[Piece]]:
    """Split a run into at most `shards` parts of about equal cost (queries x candidates).
    Candidate sets stay whole where they can (one index or one encoding per set); a set costing
    more than one part is split by query batches, at multiples of the batch the run in one piece
    scores, so every part computes exactly what the whole would. Parts keep the sets' order."""
    sizes = [_set_size(candidate_set) for candidate_set in sets]
    units: list[tuple[Piece, int]] = []
    for number, (candidate_set, size) in enumerate(zip(sets, sizes)):
        queries = len(candidate_set.queries)
        units.append(((number, 0, queries), queries * max(1, size)))
    total = sum(cost for _, cost in units)
    if not units or shards <= 1 or total == 0:
        return [[piece for piece, _ in units]]
    target = total / shards
    split: list[tuple[Piece, int]] = []
    for (number, _, queries), cost in units:
        batch = _query_batch(sets[number], sizes[number])
        parts = min(-(-queries // batch), max(1, round(cost / target)))
        step = -(-queries // parts)
        step = -(-step // batch) * batch  # rounded up to whole batches
        for start in range(0, queries, step):
            stop = min(queries, start + step)
            split.append(((number, start, stop), cost * (stop - start) // max(1, queries)))
    plan: list[list[Piece]] = [[] for _ in range(shards)]
    cumulative = 0
    for piece, cost in split:
        middle = cumulative + cost / 2
        plan[min(shards - 1, int(middle / target))].append(piece)
        cumulative += cost
    return [part for part in plan if part]


def _rank_pieces(run: Run, sets: list[CandidateSet], pieces: list[Piece], progress: Progress) -> int:
    """Rank the queries of `pieces` and store their hits; returns how many queries. Progress is
    the share of the pieces' cost done."""
    scorer = scorer_for(run.retriever, run.parameters)
    if run.retriever.kind == Retriever.Kind.DENSE:
        # The prompts actually used (the model's own when none was given) stay with the run; every
        # shard resolves the same ones.
        run.parameters.update(scorer.prompts)
        Run.objects.filter(pk=run.pk).update(parameters=run.parameters)
    relevant = relevant_passages(run.collection)
    writer = RunWriter()
    for number, (set_index, start, stop) in enumerate(pieces):
        whole = sets[set_index]
        candidate_set = CandidateSet(whole.description, whole.queries[start:stop], whole.queryset, whole.pool)

        def report(fraction: float, message: str, number=number, candidate_set=candidate_set) -> None:
            label = f"set {number + 1}/{len(pieces)} ({candidate_set.description})"
            progress((number + fraction) / len(pieces), f"{label}: {message}" if message else label)

        report(0.0, "")
        _rank_candidate_set(run, scorer, candidate_set, relevant, writer, report)
    writer.flush()
    return sum(stop - start for _, start, stop in pieces)


def _finish(run: Run, seconds: float) -> Run:
    """Mark a running run done, and store its metrics (evaluated once here, not on every page or
    API view that shows them). Returns None if it is no longer running (cancelled meanwhile, or
    another shard finished it)."""
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(status=Run.Status.DONE, seconds=seconds):
        return None
    run.refresh_from_db()
    refresh_statistics(Hit, RunQuery)
    run.metrics = evaluate_run(run)
    run.save(update_fields=["metrics"])
    return run


def execute_run(run: Run, progress: Progress = no_progress) -> Run:
    """Rank every query of the run's collection and store hits and gold ranks, in this process.
    `run.seconds` is the wall time of all of it (loading, scoring, ranking, storing). Only a
    pending run can be executed (once); a failed or cancelled run keeps no hits."""
    started = time.perf_counter()
    if not Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(status=Run.Status.RUNNING):
        run.refresh_from_db(fields=["status"])
        raise InputError(f"run {run.pk} is {run.status}; only a pending run can be executed", field="run")
    run.status = Run.Status.RUNNING
    progress = throttled(progress)
    try:
        sets = candidate_sets(run.collection)
        _rank_pieces(run, sets, _whole(sets), progress)
    except BaseException as exc:
        settle_run(run, Run.Status.CANCELLED if isinstance(exc, JobCancelled) else Run.Status.FAILED)
        raise
    _finish(run, time.perf_counter() - started)
    run.refresh_from_db()
    progress(1.0, f"{len(sets)} candidate sets ranked")
    return run


def execute_shard(run: Run, pieces: list[Piece], progress: Progress = no_progress) -> dict:
    """One shard of a run queued on workers: rank the queries of `pieces` and store their hits.
    A retried shard first removes what an earlier attempt wrote; a shard that stops removes its
    own hits (the run's may already have been removed when the whole was failed or cancelled)."""
    if not Run.objects.filter(pk=run.pk, status__in=[Run.Status.PENDING, Run.Status.RUNNING]).exists():
        raise JobCancelled(f"run {run.pk} is no longer running")
    Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(status=Run.Status.RUNNING)
    progress = throttled(progress)
    sets = candidate_sets(run.collection)
    pieces = [tuple(piece) for piece in pieces]
    query_ids = [query.pk for index, start, stop in pieces for query in sets[index].queries[start:stop]]
    delete_results(run, query_ids)
    try:
        queries = _rank_pieces(run, sets, pieces, progress)
    except BaseException:
        delete_results(run, query_ids)
        raise
    progress(1.0, f"{queries} queries ranked")
    return {"queries": queries}


def complete_sharded_run(run_id: int) -> Run | None:
    """Called after each shard: once every shard of the run has succeeded, the run is done (its
    seconds: from the first shard's start to now) and its job succeeds. Only one caller wins.
    Once the run's job has failed or been cancelled, each shard that ends settles the run again:
    one that was already storing hits when the job ended stores them after the first settling,
    and they must go too."""
    run = Run.objects.select_related("job").get(pk=run_id)
    job = run.job
    if job is not None and job.status in (Job.Status.FAILED, Job.Status.CANCELLED):
        settle_run(run, Run.Status.CANCELLED if job.status == Job.Status.CANCELLED else Run.Status.FAILED)
        return None
    if job is None or job.children.exclude(status=Job.Status.SUCCEEDED).exists():
        return None
    seconds = (timezone.now() - (job.started_at or job.created_at)).total_seconds()
    if _finish(run, seconds) is None:
        return None
    finish_job(job.pk, run_summary(run))
    return run


def run_summary(run: Run) -> dict:
    return {"run_id": run.pk, "queries": run.query_results.count(), "seconds": run.seconds}


def start_run_async(
    collection: Collection, retriever: Retriever, *, user=None, shards: int | None = None, **parameters
) -> Run:
    """Create the run and its job, split it into shards (child jobs) and send them to the
    workers as one group: BM25 to the CPU queue, dense to GPU. Refused (BrokerUnavailable, with
    nothing written) when the broker cannot be reached."""
    from retrieval import tasks

    is_bm25 = retriever.kind == Retriever.Kind.BM25
    shards = settings.MARGINALIA_RUN_SHARDS if shards is None else shards
    if shards < 1:
        raise InputError(f"must be at least 1, got {shards}", field="shards")
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
        plan = plan_shards(candidate_sets(collection), shards)
        job.parameters["shards"] = len(plan)
        job.save(update_fields=["parameters"])
        dispatch_children(
            job,
            tasks.run_bm25 if is_bm25 else tasks.run_dense,
            [[run.pk, [list(piece) for piece in part]] for part in plan],
            max_attempts=1 + settings.MARGINALIA_SHARD_RETRIES,
        )
    return run
