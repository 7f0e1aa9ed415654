"""A judge's labels over a pool, so that they form qrels (`judge:NAME`, read by
evaluation.qrels_sources), and qrels from elsewhere imported as a judge's labels.

Pools (every pair of one, not only the items annotators are shown):
- a relevance study's pool: the (query, passage) pair of each of its items, hidden gold and
  qualification items included, each asked in the study's own wording (`judge_prompt`, as
  judge_study asks it);
- a collection's qrels pairs: every judged pair of its imported qrels;
- runs' pool: the union of the runs' top `depth` per query (TREC's depth pooling).
A pool may be sampled (`stratified_sample`): a seeded sample stratified by the human grade within
each query, so that a judge slower than its pool (the embedded CPU judge on a collection's qrels)
is asked a stated share of it rather than all of it.
The last two are asked outside any study: BIRCO's direct-scoring prompt (0-10, the task
objective as guidelines) or the judge's built-in prompt (UMBRELA's 0-3), the query read as
rerank reads it (retrieval.scoring.query_text with the context QUERY_CONTEXT and the mask).

Each answer is a JudgeAnswer of the pair (query, passage; no item), the cache a rerank uses: a
pair already asked with the same prompt and sample is never asked again, and an answer the
judge gave to the same prompt for an item (judge_study) is copied rather than asked.

Imported labels: a TREC qrels file (`qid 0 docid grade` or `qid docid grade`) becomes the labels
of a judge of backend "imported" whose settings are the collection, the file's name and its
SHA-256: another file under the same name is a new version, the same file again changes nothing.
Each label is a pair answer whose prompt hash is the file's SHA-256.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from annotation.models import Item, ItemCandidate, Study
from annotation.services import get_study
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.input_rules import parse_integer
from retrieval.metrics import stored_hits
from retrieval.models import Collection, Passage, Qrel, Query, Run
from retrieval.qrels_sources import rows_for
from retrieval.scoring import query_text
from retrieval.services.qrels_import import read_qrels_file

from .asking import Question, ask
from .models import Judge, JudgeAnswer
from .prompts import MASK, Prompt, pair_prompt
from .services import MAX_SAMPLES, PROMPTED, judge_prompt, judge_version, store_answers

QUERY_CONTEXT = (4, 4)  # sentences of left / right context a RELiC query is read with outside a study


@dataclass(frozen=True)
class PoolPair:
    query: Query
    passage: Passage
    prompt: Prompt


def study_pool(study: Study, judge: Judge) -> list[PoolPair]:
    """Every (query, passage) pair of a relevance study's items, any role, in study order, asked
    as judge_study asks the item (the first item of a pair that several items show)."""
    if study.kind != Study.Kind.RELEVANCE:
        raise InputError(f"study {study.pk} is a {study.kind} study; a pool is a relevance study's", field="study")
    pairs: dict[tuple[int, int], PoolPair] = {}
    items = Item.objects.filter(study=study).select_related("study", "query").order_by("position")
    # Each item's first candidate's passage, read for the whole study at once: its candidates come
    # highest position first, so the lowest is written last.
    firsts: dict[int, Passage] = {}
    for candidate in (
        ItemCandidate.objects.filter(item__study=study).select_related("passage").order_by("item_id", "-position")
    ):
        firsts[candidate.item_id] = candidate.passage
    for item in items:
        passage = firsts[item.pk]
        pairs.setdefault((item.query_id, passage.pk), PoolPair(item.query, passage, judge_prompt(item, judge)))
    return list(pairs.values())


def _outside_study(judge: Judge, pairs: Sequence[tuple[Query, Passage]], objective: str) -> list[PoolPair]:
    prompt_name = judge.settings.get("prompt", "")
    return [
        PoolPair(
            query, passage, pair_prompt(query_text(query, *QUERY_CONTEXT, MASK), passage.text, objective, prompt_name)
        )
        for query, passage in pairs
    ]


def qrels_pool(collection: Collection, judge: Judge, objective: str = "") -> list[PoolPair]:
    """Every pair of the collection's imported qrels, in query and passage order."""
    qrels = Qrel.objects.filter(query__collection=collection).select_related("query", "passage")
    pairs = [(qrel.query, qrel.passage) for qrel in qrels.order_by("query__ordinal", "query_id", "passage__ordinal")]
    if not pairs:
        raise InputError(f"collection {collection.name} has no qrels", field="collection")
    return _outside_study(judge, pairs, objective)


def runs_pool(
    collection: Collection, runs: Sequence[Run], depth: int, judge: Judge, objective: str = ""
) -> list[PoolPair]:
    """The union of the runs' top `depth` hits per query (TREC's depth pool), queries in
    collection order, each query's passages in order of first appearance."""
    if not 1 <= depth <= 10_000:
        raise InputError(f"must be 1 to 10000, got {depth}", field="depth")
    if not runs:
        raise InputError("name at least one run", field="runs")
    union: dict[int, dict[int, None]] = {}
    for run in runs:
        if run.collection_id != collection.pk:
            raise InputError(f"run {run.pk} ranks another collection than {collection.name}", field="runs")
        for query_id, passages in stored_hits(run, depth).items():
            union.setdefault(query_id, {}).update(dict.fromkeys(passages))
    queries = Query.objects.in_bulk(list(union))
    passages = Passage.objects.in_bulk([pk for found in union.values() for pk in found])
    ordered = sorted(union, key=lambda pk: (queries[pk].ordinal, pk))
    return _outside_study(judge, [(queries[q], passages[p]) for q in ordered for p in union[q]], objective)


def pool_strata(grades: Mapping[int, Mapping[int, int]]) -> int:
    """How many (query, grade) strata the human labels `grades` (query id -> passage id -> grade)
    have: the smallest stratified sample that keeps one pair of each."""
    return len({(query_id, grade) for query_id, passages in grades.items() for grade in passages.values()})


def check_sample_size(size: int, strata: int) -> None:
    if size < strata:
        raise InputError(f"must be at least {strata} (one pair of each query's each grade), got {size}", field="sample")


def stratified_sample(
    pairs: Sequence[PoolPair], grades: Mapping[int, Mapping[int, int]], size: int, seed: int
) -> list[PoolPair]:
    """`size` of the pool's pairs, stratified by the human grade within each query (`grades`:
    query id -> passage id -> grade; a pair without one is a stratum of its query's own), in
    pool order. Every (query, grade) stratum gets one pair first, so every query keeps each of
    its grades (a query's few relevant pairs are never all left out, as a proportional share
    of them would be); the rest is shared in proportion to what each stratum has left, whole
    pairs by largest remainder (equal remainders in a seeded order). Each stratum's pairs are
    the first of a random.Random(seed) permutation of it that does not depend on `size`: the
    same pool, grades, size and seed give the same pairs, and a larger sample under the same
    seed keeps a smaller one's pairs wherever a stratum's share does not shrink (so the answers
    stored for a first, small card are reused by a larger one). InputError (field `sample`)
    when `size` is below the number of strata; the whole pool when `size` covers it."""
    if size >= len(pairs):
        return list(pairs)
    strata: dict[tuple, list[int]] = {}
    for index, pair in enumerate(pairs):
        grade = grades.get(pair.query.pk, {}).get(pair.passage.pk)
        strata.setdefault((pair.query.pk, grade is None, grade or 0), []).append(index)
    check_sample_size(size, len(strata))
    keys = sorted(strata)
    generator = random.Random(seed)
    generator.shuffle(keys)  # the order equal remainders are served in
    spare, left = size - len(strata), {key: len(strata[key]) - 1 for key in keys}
    exact = {key: spare * left[key] / sum(left.values()) for key in keys}
    quota = {key: 1 + math.floor(exact[key]) for key in keys}
    by_remainder = sorted(keys, key=lambda key: exact[key] - math.floor(exact[key]), reverse=True)
    for key in by_remainder[: size - sum(quota.values())]:
        quota[key] += 1
    permuted = {key: generator.sample(strata[key], len(strata[key])) for key in sorted(strata)}
    chosen = sorted(index for key in keys for index in permuted[key][: quota[key]])
    return [pairs[index] for index in chosen]


def pool_spec(
    *, study: int | None = None, collection: Collection | None = None, runs: str = "", depth=None, objective: str = ""
) -> dict:
    """A pool spec from what a command or a request names: a study, or a collection with
    optionally comma-separated run ids and a depth (InputError naming the field)."""
    if (study is None) == (collection is None):
        raise InputError("name a relevance study or a collection", field="pool")
    if study is not None:
        return {"study": study}
    spec = {"collection": collection.pk, "objective": objective}
    if runs:
        spec["runs"] = [parse_integer(part.strip(), field="runs") for part in str(runs).split(",") if part.strip()]
        spec["depth"] = parse_integer(str(depth), field="depth") if depth not in (None, "") else 10
    return spec


def pool_pairs(judge: Judge, spec: dict) -> list[PoolPair]:
    """The pool a spec names: {"study": id}, or {"collection": id} (its qrels pairs) with
    optionally "runs" (ids) and "depth" (their depth pool), and "objective" (BIRCO's task
    objective, for pairs asked outside a study). What commands, jobs and the API pass."""
    if spec.get("study") is not None:
        return study_pool(get_study(spec["study"], field="study"), judge)
    collection = Collection.objects.get(pk=spec["collection"])
    if spec.get("runs"):
        runs = list(Run.objects.filter(pk__in=spec["runs"], collection=collection, status=Run.Status.DONE))
        if len(runs) != len(set(spec["runs"])):
            raise InputError(f"every run must be a finished run of collection {collection.name}", field="runs")
        return runs_pool(collection, runs, int(spec.get("depth") or 10), judge, spec.get("objective", ""))
    return qrels_pool(collection, judge, spec.get("objective", ""))


def _require_prompted(judge: Judge) -> None:
    if judge.backend not in PROMPTED:
        raise InputError(
            f"judge {judge} is a {judge.backend} judge: it answers no prompts to label a pool", field="judge"
        )


def label_pool(judge: Judge, pairs: Sequence[PoolPair], samples: int = 1, progress: Progress = no_progress) -> dict:
    """Ask the judge every pair of the pool `samples` times (sample i with seed + i), skipping
    what is stored for the pair and copying what it answered to the same prompt for an item.
    Returns the tally: pairs, samples, answered, failed (current prompts), asked, reused."""
    _require_prompted(judge)
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")
    if not pairs:
        raise InputError("the pool has no pairs", field="pool")
    hashes = {pair.prompt.hash for pair in pairs}
    answers = JudgeAnswer.objects.filter(judge=judge, sample__lt=samples)
    stored = set(
        rows_for(
            answers.filter(item__isnull=True), "prompt_hash", hashes, "query_id", "passage_id", "prompt_hash", "sample"
        )
    )
    given: dict[tuple[str, int], tuple] = {}
    columns = (
        "prompt_hash",
        "sample",
        "raw_response",
        "parsed",
        "failure_reason",
        "prompt_tokens",
        "completion_tokens",
        "seconds",
    )
    for row in rows_for(answers.filter(item__isnull=False), "prompt_hash", hashes, *columns):
        given.setdefault(row[:2], row)
    copies, questions = [], []
    for sample in range(samples):
        for pair in pairs:
            if (pair.query.pk, pair.passage.pk, pair.prompt.hash, sample) in stored:
                continue
            keys = {"query": pair.query, "passage": pair.passage}
            if (pair.prompt.hash, sample) in given:
                copies.append(JudgeAnswer(**dict(zip(columns, given[(pair.prompt.hash, sample)])), **keys))
            else:
                questions.append(Question(pair.prompt, sample, keys))
    store_answers(judge, copies)
    progress(0.0, f"{len(questions)} of {len(pairs) * samples} answers to ask ({judge}); {len(copies)} reused")
    asked = len(ask(judge, questions, progress))
    return {**pool_tally(judge, pairs, samples), "asked": asked, "reused": len(copies)}


def pool_tally(judge: Judge, pairs: Sequence[PoolPair], samples: int) -> dict:
    """How many of the pool's answers (its pairs x samples, current prompts) read and failed."""
    wanted = {(pair.query.pk, pair.passage.pk, pair.prompt.hash) for pair in pairs}
    answers = JudgeAnswer.objects.filter(judge=judge, item__isnull=True, sample__lt=samples)
    read = [
        parsed is not None
        for query_id, passage_id, prompt_hash, parsed in rows_for(
            answers, "prompt_hash", {hash_ for *_, hash_ in wanted}, "query_id", "passage_id", "prompt_hash", "parsed"
        )
        if (query_id, passage_id, prompt_hash) in wanted
    ]
    return {
        "judge": judge.name,
        "version": judge.version,
        "backend": judge.backend,
        "pairs": len(pairs),
        "samples": samples,
        "answered": sum(read),
        "failed": len(read) - sum(read),
    }


def pool_answers(judge: Judge, pairs: Sequence[PoolPair], samples: int) -> dict[tuple[int, int], list[dict | None]]:
    """(query id, passage id) -> the judge's parsed answer per sample 0..samples-1 (None where
    unreadable or not asked) to the pool's prompts; an imported judge's labels whatever the
    prompt (it was asked none)."""
    by_prompt = judge.backend in PROMPTED
    wanted = {(pair.query.pk, pair.passage.pk): pair.prompt.hash for pair in pairs}
    answers = {pair: [None] * samples for pair in wanted}
    rows = JudgeAnswer.objects.filter(judge=judge, item__isnull=True, sample__lt=samples)
    columns = ("query_id", "passage_id", "prompt_hash", "sample", "parsed")
    found = rows_for(rows, "prompt_hash", set(wanted.values()), *columns) if by_prompt else rows.values_list(*columns)
    for query_id, passage_id, prompt_hash, sample, parsed in found:
        pair = (query_id, passage_id)
        if pair in wanted and (not by_prompt or wanted[pair] == prompt_hash):
            answers[pair][sample] = parsed
    return answers


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return digest.hexdigest()


def import_judge_labels(name: str, path: str | Path, collection: Collection, user=None) -> dict:
    """The qrels file at `path` stored as the labels of judge `name` on `collection` (one
    transaction; a bad line is an InputError naming the file, line and field, nothing
    written): keys judge, version, collection, labels, queries, relevant, new (False when this
    very file was imported under this name before)."""
    wanted = read_qrels_file(collection, path)
    digest = file_digest(path)
    settings = {"collection": collection.pk, "file": Path(path).name[:200], "sha256": digest}
    with transaction.atomic():
        judge = judge_version(name, Judge.Backend.IMPORTED, settings, user)
        new = not JudgeAnswer.objects.filter(judge=judge).exists()
        if new:
            JudgeAnswer.objects.bulk_create(
                [
                    JudgeAnswer(
                        judge=judge,
                        query_id=query_id,
                        passage_id=passage_id,
                        prompt_hash=digest,
                        raw_response=f"line {line}: {relevance}",
                        parsed={"label": relevance},
                    )
                    for (query_id, passage_id), (relevance, line) in wanted.items()
                ],
                batch_size=2000,
            )
    return {
        "judge": judge.name,
        "version": judge.version,
        "collection": collection.name,
        "labels": len(wanted),
        "queries": len({query_id for query_id, _ in wanted}),
        "relevant": sum(relevance > 0 for relevance, _ in wanted.values()),
        "new": new,
    }
