"""Runs: a retriever applied to a collection's queries, ranked per candidate set and stored.

Every retriever goes through the same ranking, trec_eval's (retrieval/ranking.py): score
descending, equal scores by passage id descending; the top `depth` hits stored, and each query's
relevant passages ranked exactly over the whole candidate set, so mean rank and recall stay exact
beyond the depth. Scores are ranked block by block while they are still in the CPU's cache, and
stored through retrieval/services/run_writer.py at the database's insert speed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.errors import JobCancelled
from jobs.models import Job
from jobs.progress import Progress, no_progress, throttled
from jobs.services import create_job, dispatch_children, finish_job
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Scorer, cached_term_counts, validate_parameters, worth_caching
from retrieval.chunks import chunks
from retrieval.errors import InputError
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Document, Hit, Qrel, Query, Retriever, Run, RunQuery
from retrieval.planner import refresh_statistics
from retrieval.ranking import ranks_of, tie_break, top_ranked
from retrieval.scoring import Scorer, query_text
from retrieval.selectors import registered_dense_retriever

from .candidates import CandidateSet, PassageRow, candidate_sets, load_passages
from .import_status import unimported_reason
from .run_status import delete_results, has_results, settle_run
from .run_writer import RunWriter

DEFAULT_CONTEXT = (4, 4)
DEFAULT_DEPTH = 100
# Score matrices are computed and ranked for at most this many (query, passage) cells at a time
# (2 MiB by default: MARGINALIA_SCORE_CELLS).
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


def warm_term_counts(collection: Collection, document: Document | None = None) -> int:
    """Tokenise the collection's candidate sets now (after an import; those of one book's
    queries with `document`), so that its first run only loads them; sets too small to be worth
    caching are left to the run. Returns how many sets were counted."""
    queries = None if document is None else collection.queries.filter(document=document).order_by("ordinal")
    sets = [s for s in candidate_sets(collection, queries) if worth_caching(s.size())]
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
    if reason := unimported_reason(collection):
        raise InputError(f"{reason}; rank it once the import has finished", field="collection")
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


def relevant_passages(collection: Collection, query_ids: list[int] | None = None) -> dict[int, list[int]]:
    """Query id -> ids of its passages with relevance > 0 (of `query_ids` only, when given)."""
    qrels = Qrel.objects.filter(query__collection=collection, relevance__gt=0)
    batches = [qrels] if query_ids is None else [qrels.filter(query_id__in=chunk) for chunk in chunks(query_ids)]
    relevant: dict[int, list[int]] = {}
    for batch in batches:
        for query_id, passage_id in batch.values_list("query_id", "passage_id"):
            relevant.setdefault(query_id, []).append(passage_id)
    return relevant


def _query_batch(passages: int) -> int:
    """How many of a set's queries are scored and ranked at once: a block of at most
    MAX_SCORE_CELLS scores, small enough to stay in the CPU's cache between scoring a row and
    selecting its top hits (a block as large as memory allows was slower per query than one
    query at a time)."""
    return max(1, MAX_SCORE_CELLS // max(1, passages))


def _rank_candidate_set(
    run: Run,
    scorer: Scorer,
    candidate_set: CandidateSet,
    passages: list[PassageRow],
    query_texts: list[str],
    relevant: dict[int, list[int]],
    writer: RunWriter,
    progress: Progress,
) -> None:
    """Score and rank one candidate set's queries block by block; hand their hits and the exact
    ranks of their relevant passages to `writer`. Ties follow trec_eval (retrieval.ranking).
    Progress (the job's heartbeat) is reported after every block."""
    depth = run.parameters["depth"]
    passage_ids = np.fromiter((passage.pk for passage in passages), dtype=np.int64, count=len(passages))
    column_of = {int(passage_id): column for column, passage_id in enumerate(passage_ids.tolist())}
    key = tie_break([passage.external_id for passage in passages])
    by_key = np.argsort(-key)  # the tie order, sorted once for every block of this set
    queries = candidate_set.queries
    batch = _query_batch(len(passages))
    for offset in range(0, len(queries), batch):
        chunk = queries[offset : offset + batch]
        scores = scorer.score(
            query_texts[offset : offset + batch],
            passages,
            # Called while this chunk is scored, so it sees this iteration's offset and chunk.
            lambda fraction, message: progress((offset + fraction * len(chunk)) / len(queries), message),  # noqa: B023
        )
        top = top_ranked(scores, depth, key, by_key)
        query_ids = np.fromiter((query.pk for query in chunk), dtype=np.int64, count=len(chunk))
        writer.add_ranked(query_ids, passage_ids[top], np.take_along_axis(scores, top, axis=1))
        inside = [[passage for passage in relevant.get(query.pk, ()) if passage in column_of] for query in chunk]
        ranks = ranks_of(scores, [[column_of[passage_id] for passage_id in ids] for ids in inside], key)
        for query, ids, query_ranks in zip(chunk, inside, ranks):
            writer.add_query(query.pk, len(passages), dict(zip(map(str, ids), query_ranks)))
        done = offset + len(chunk)
        progress(done / len(queries), f"{done}/{len(queries)} queries")


def plan_shards(sets: list[CandidateSet], shards: int) -> list[list[int]]:
    """Split a run into at most `shards` parts of about equal cost (queries x candidates), each
    given as its queries' ids, in order. Candidate sets stay whole where they can (one index per
    set); a set costing more than one part is split by its queries. A shard then loads only its
    own queries and their sets (`shard_sets`), not the collection's. BM25 scores each query on
    its own, so every part computes exactly what the whole would; a dense part encodes its own
    queries in its own batches, and which texts share a batch moves an embedding by float32
    rounding (about 1e-7). Parts keep the sets' order."""
    units = [
        (candidate_set.queries, len(candidate_set.queries) * max(1, candidate_set.size())) for candidate_set in sets
    ]
    total = sum(cost for _, cost in units)
    if not units or shards <= 1 or total == 0:
        return [[query.pk for queries, _ in units for query in queries]]
    target = total / shards
    pieces: list[tuple[list[Query], float]] = []
    for queries, cost in units:
        parts = min(len(queries), max(1, round(cost / target)))
        step = -(-len(queries) // parts)
        pieces += [
            (queries[start : start + step], cost * len(queries[start : start + step]) / len(queries))
            for start in range(0, len(queries), step)
        ]
    plan: list[list[int]] = [[] for _ in range(shards)]
    cumulative = 0.0
    for queries, cost in pieces:
        plan[min(shards - 1, int((cumulative + cost / 2) / target))] += [query.pk for query in queries]
        cumulative += cost
    return [part for part in plan if part]


def shard_sets(collection: Collection, query_ids: list[int]) -> list[CandidateSet]:
    """The candidate sets of a shard's queries, loaded without the rest of the collection's."""
    loaded: dict[int, Query] = {}
    for chunk in chunks(query_ids):
        loaded.update((query.pk, query) for query in collection.queries.filter(pk__in=chunk))
    return candidate_sets(collection, [loaded[query_id] for query_id in query_ids])


# Passages of many small candidate sets (BIRCO pools) are loaded and prepared together up to this
# many pool entries: a dense run encodes them in one call instead of a batch per pool.
GROUP_POOL_ENTRIES = 50_000


def _groups(work: list[CandidateSet]) -> Iterator[range]:
    """Positions of consecutive candidate sets that share one passage preparation: pools up to
    GROUP_POOL_ENTRIES entries together; a book's windows or a whole collection alone."""
    start, entries = 0, 0
    for position, candidate_set in enumerate(work):
        if candidate_set.pool is None:
            if start < position:
                yield range(start, position)
            yield range(position, position + 1)
            start, entries = position + 1, 0
            continue
        entries += len(candidate_set.pool)
        if entries >= GROUP_POOL_ENTRIES:
            yield range(start, position + 1)
            start, entries = position + 1, 0
    if start < len(work):
        yield range(start, len(work))


def _rank_sets(run: Run, work: list[CandidateSet], relevant: dict[int, list[int]], progress: Progress) -> int:
    """Rank the queries of the candidate sets `work` and store their hits and the ranks of their
    `relevant` passages; returns how many queries. The scorer is first told every query (a dense
    run encodes them once, in length-sorted batches across candidate sets), then each group's
    passages (encoded or read from the cache at once), then the sets are scored one by one.
    Progress is the share of the sets done."""
    scorer = scorer_for(run.retriever, run.parameters)
    if run.retriever.kind == Retriever.Kind.DENSE:
        # The prompts actually used (the model's own when none was given) stay with the run; every
        # shard resolves the same ones.
        run.parameters.update(scorer.prompts)
        Run.objects.filter(pk=run.pk).update(parameters=run.parameters)
    writer = RunWriter(run.pk)
    left, right = run.parameters["context_left"], run.parameters["context_right"]
    texts = [[query_text(query, left, right, scorer.mask_token) for query in part.queries] for part in work]
    scorer.prepare([text for part in texts for text in part], [], lambda fraction, message: progress(0.0, message))
    for group in _groups(work):
        group_passages = load_passages([work[number] for number in group])
        at = group.start / len(work)
        scorer.prepare(
            [],
            [passage for passages in group_passages for passage in passages],
            lambda fraction, message, at=at: progress(at, message),
        )
        for number, passages in zip(group, group_passages):
            candidate_set = work[number]

            def report(fraction: float, message: str, number=number, candidate_set=candidate_set) -> None:
                label = f"set {number + 1}/{len(work)} ({candidate_set.description})"
                progress((number + fraction) / len(work), f"{label}: {message}" if message else label)

            report(0.0, "")
            _rank_candidate_set(run, scorer, candidate_set, passages, texts[number], relevant, writer, report)
    writer.flush()
    return sum(len(part.queries) for part in work)


def _finish(run: Run, seconds: float) -> Run:
    """Mark a running run done, and store its metrics (evaluated once here, not on every page or
    API view that shows them). Returns None if it is no longer running (cancelled meanwhile, or
    another shard finished it)."""
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(status=Run.Status.DONE, seconds=seconds):
        return None
    run.refresh_from_db()
    refresh_statistics(Hit, RunQuery)
    run.metrics = evaluate_run(run, page_coverage=True)
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
        _rank_sets(run, sets, relevant_passages(run.collection), progress)
    except BaseException as exc:
        settle_run(run, Run.Status.CANCELLED if isinstance(exc, JobCancelled) else Run.Status.FAILED)
        raise
    _finish(run, time.perf_counter() - started)
    run.refresh_from_db()
    progress(1.0, f"{len(sets)} candidate sets ranked")
    return run


def execute_shard(run: Run, query_ids: list[int], progress: Progress = no_progress) -> dict:
    """One shard of a run queued on workers: rank the queries `query_ids` and store their hits.
    A retried shard first removes what an earlier attempt wrote; a shard that stops removes its
    own hits (the run's may already have been removed when the whole was failed or cancelled)."""
    if not Run.objects.filter(pk=run.pk, status__in=[Run.Status.PENDING, Run.Status.RUNNING]).exists():
        raise JobCancelled(f"run {run.pk} is no longer running")
    Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(status=Run.Status.RUNNING)
    progress = throttled(progress)
    if has_results(run, query_ids):  # an earlier attempt's; a first attempt writes nothing here
        delete_results(run, query_ids)
    try:
        relevant = relevant_passages(run.collection, query_ids)
        queries = _rank_sets(run, shard_sets(run.collection, query_ids), relevant, progress)
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
            [[run.pk, part] for part in plan],
            max_attempts=1 + settings.MARGINALIA_SHARD_RETRIES,
        )
    return run
