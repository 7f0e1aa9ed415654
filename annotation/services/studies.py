"""Creating proxy studies: which queries become items and which candidates each item shows.

A proxy item shows the gold passage (the query's relevant qrel passage; with several, the most
relevant, then the first imported) beside the k - 1 best-ranked usable negatives of a chosen run.
A negative is unusable when it would make the task ambiguous or trivially easy:
- it overlaps the gold: same document and overlapping sentence ranges [start, start + length);
  for passages without sentence positions (BEIR), one of the gold's sentences appears in it or
  it appears in the gold;
- it repeats the shown context: its text appears in the context the annotator reads (the last L
  left and first R right sentences; for a query without context, the query text itself), or one
  of those context sentences (the whole query text) appears in it;
- it is another relevant passage of the query, or duplicates an earlier candidate's text.
Texts are compared ignoring case and runs of whitespace; fragments under MIN_SHARED_CHARS are
ignored. Everything random (which queries, their order, each item's candidate order) comes from
the study's seed, so the same request on the same data builds the same study. Gold positions are
counterbalanced: each display position holds the gold in as many items as the others (within
one), in a seeded random order; the negatives are shuffled around the gold per item.

What every kind of study shares lives here too: the common settings' validation, `store_study`
(the study, its items and their candidates in one transaction) and `get_study`; label_studies.py
plans the relevance and quotability items and stores them the same way.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Collection, Document, Hit, Passage, Qrel, Query, Run
from retrieval.planner import refresh_statistics
from retrieval.selectors import require_done

from ..models import Item, ItemCandidate, Study
from ..selectors import shown_context

MIN_CANDIDATES, MAX_CANDIDATES = 2, 20
MAX_JUDGMENTS_PER_ITEM = 50
MAX_CONTEXT_SENTENCES = 50
# Shorter fragments ("Yes.", "he said") recur by chance; only longer ones count as repeated text.
MIN_SHARED_CHARS = 20
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class SkippedQuery:
    query: str  # the query's external id (staff-facing report)
    reason: str


@dataclass
class StudyCreation:
    study: Study
    items: int
    skipped: list[SkippedQuery] = field(default_factory=list)
    pool: dict | None = None  # a relevance study's pool: strategy, pairs pooled, budget

    def summary(self) -> dict:
        """The JSON summary the command, the API and the staff form all report."""
        summary = {
            "study_id": self.study.pk,
            "items": self.items,
            "skipped": len(self.skipped),
            "skipped_queries": [asdict(skip) for skip in self.skipped],
        }
        return summary if self.pool is None else {**summary, "pool": self.pool}


@dataclass
class PlannedItem:
    """An item before it is stored: its query, its candidates in display order (unsaved;
    `store_study` sets their item and position) and, for label items, every source that found
    the passage (staff provenance)."""

    query: Query
    candidates: list[ItemCandidate]
    sources: list[dict] = field(default_factory=list)


def get_study(study_id: int, field: str = "study_id") -> Study:
    """The study a command or report names by id, or an InputError naming the field."""
    study = Study.objects.filter(pk=study_id).select_related("collection").first()
    if study is None:
        raise InputError(f"no study with id {study_id}", field=field)
    return study


def create_proxy_study(
    *,
    name: str,
    collection: Collection,
    negatives_run: Run,
    items: int,
    candidates: int = 3,
    judgments_per_item: int = 3,
    seed: int = 0,
    context_left: int = 4,
    context_right: int = 4,
    single_sentence: bool = False,
    book: Document | None = None,
    guidelines: str = "",
    annotators: Iterable[AbstractBaseUser] = (),
    claim_minutes: int = 30,
    more_context: bool = False,
    created_by: AbstractBaseUser | None = None,
    progress: Progress = no_progress,
) -> StudyCreation:
    """Build a proxy study of up to `items` items in one transaction. `more_context` lets
    annotators read the book around each candidate: off by default, because the gold's
    neighbouring sentences are the quotation's own context and would give the answer away.

    Queries are visited in a seeded random order; a query that cannot give a complete item (no
    gold, too few usable negatives in the run) is skipped and reported, and the next one is
    tried, so the study gets `items` items whenever enough queries qualify. Raises InputError
    (naming the offending field) for bad settings or when no query qualifies at all.
    """
    annotators = list(annotators)
    _validate_settings(
        name=name,
        collection=collection,
        negatives_run=negatives_run,
        items=items,
        candidates=candidates,
        judgments_per_item=judgments_per_item,
        context_left=context_left,
        context_right=context_right,
        book=book,
        claim_minutes=claim_minutes,
    )
    queries = _eligible_queries(collection, single_sentence=single_sentence, book=book)
    random.Random(seed).shuffle(queries)

    planned: list[PlannedItem] = []
    skipped: list[SkippedQuery] = []
    for query in queries:
        if len(planned) == items:
            break
        chosen, reason = _plan_candidates(query, negatives_run, candidates, context_left, context_right)
        if chosen is None:
            skipped.append(SkippedQuery(query.external_id, reason))
        else:
            planned.append(PlannedItem(query, chosen))
        progress(len(planned) / items, f"{len(planned)} of {items} items planned")
    if not planned:
        raise no_item_error(f"no query of collection '{collection.name}'", skipped, field="items")
    for entry, gold_position in zip(planned, _gold_positions(len(planned), candidates, seed)):
        entry.candidates = _display_order(entry.candidates, gold_position, seed, entry.query)
    parameters = {
        "requested_items": items,
        "single_sentence": single_sentence,
        "book": book.external_id if book else None,
    }
    return store_study(
        planned,
        skipped,
        annotators=annotators,
        parameters=parameters,
        progress=progress,
        name=name,
        kind=Study.Kind.PROXY,
        collection=collection,
        negatives_run=negatives_run,
        seed=seed,
        candidates_per_item=candidates,
        judgments_per_item=judgments_per_item,
        context_left=context_left,
        context_right=context_right,
        guidelines=guidelines,
        claim_minutes=claim_minutes,
        more_context=more_context,
        created_by=created_by,
    )


def store_study(
    planned: Sequence[PlannedItem],
    skipped: list[SkippedQuery],
    *,
    annotators: Iterable[AbstractBaseUser],
    parameters: dict,
    progress: Progress,
    **fields,
) -> StudyCreation:
    """The study (`fields` are Study fields; `parameters` get the skipped queries), its items in
    the planned order and each item's candidates, in one transaction. Candidates are inserted in
    DISPLAY order, so primary keys follow what annotators see and never single out the gold."""
    with transaction.atomic():
        study = Study.objects.create(**fields, parameters={**parameters, "skipped": [asdict(skip) for skip in skipped]})
        study.annotators.set(annotators)
        items = Item.objects.bulk_create(
            [Item(study=study, query=entry.query, position=position) for position, entry in enumerate(planned)]
        )
        for item, entry in zip(items, planned):
            for position, candidate in enumerate(entry.candidates):
                candidate.item, candidate.position = item, position
        ItemCandidate.objects.bulk_create([candidate for entry in planned for candidate in entry.candidates])
        refresh_statistics(Item, ItemCandidate)
        if any(entry.sources for entry in planned):
            study.parameters["sources"] = {str(item.pk): entry.sources for item, entry in zip(items, planned)}
            study.save(update_fields=["parameters"])
    progress(1.0, f"{len(planned)} items")
    return StudyCreation(study=study, items=len(planned), skipped=skipped)


def no_item_error(which: str, skipped: list[SkippedQuery], field: str) -> InputError:
    """Nothing to store: `which` queries gave no item; the first skipped one says why."""
    detail = f"; e.g. query {skipped[0].query}: {skipped[0].reason}" if skipped else ""
    return InputError(f"{which} can be made into an item{detail}", field=field)


def _validate_settings(
    *,
    name,
    collection,
    negatives_run,
    items,
    candidates,
    judgments_per_item,
    context_left,
    context_right,
    book,
    claim_minutes,
) -> None:
    validate_common_settings(
        name=name,
        judgments_per_item=judgments_per_item,
        context_left=context_left,
        context_right=context_right,
        claim_minutes=claim_minutes,
    )
    if not MIN_CANDIDATES <= candidates <= MAX_CANDIDATES:
        raise InputError(f"must be between {MIN_CANDIDATES} and {MAX_CANDIDATES}, got {candidates}", field="candidates")
    if items < 1:
        raise InputError(f"must be at least 1, got {items}", field="items")
    validate_run(negatives_run, collection, "negatives_run")
    if book is not None and book.collection_id != collection.pk:
        raise InputError(f"book '{book.external_id}' is not in collection '{collection.name}'", field="book")


def validate_common_settings(*, name, judgments_per_item, context_left, context_right, claim_minutes) -> None:
    """The settings every kind of study shares (name, judgments per item, context, claims)."""
    if not name or not name.strip():
        raise InputError("a study needs a name", field="name")
    if Study.objects.filter(name=name).exists():
        raise InputError(f"a study named '{name}' already exists", field="name")
    if not 1 <= judgments_per_item <= MAX_JUDGMENTS_PER_ITEM:
        raise InputError(
            f"must be between 1 and {MAX_JUDGMENTS_PER_ITEM}, got {judgments_per_item}", field="judgments_per_item"
        )
    for field_name, value in (("context_left", context_left), ("context_right", context_right)):
        if not 0 <= value <= MAX_CONTEXT_SENTENCES:
            raise InputError(f"must be between 0 and {MAX_CONTEXT_SENTENCES}, got {value}", field=field_name)
    if claim_minutes < 1:
        raise InputError(f"must be at least 1, got {claim_minutes}", field="claim_minutes")


def validate_run(run: Run, collection: Collection, field_name: str) -> None:
    """A run a study may draw from: finished, and ranking the study's collection."""
    if run.collection_id != collection.pk:
        raise InputError(
            f"run {run.pk} ranks collection '{run.collection.name}', not '{collection.name}'", field=field_name
        )
    require_done(run, field_name)


def _eligible_queries(collection: Collection, *, single_sentence: bool, book: Document | None) -> list[Query]:
    queries = Query.objects.filter(collection=collection)
    if single_sentence:
        queries = queries.filter(quote_length=1)
    if book is not None:
        queries = queries.filter(document=book)
    return list(queries.order_by("ordinal", "pk"))


def _plan_candidates(query: Query, run: Run, k: int, context_left: int, context_right: int):
    """The gold and the first k - 1 usable negatives of the run, or (None, why not)."""
    relevant = list(
        Qrel.objects.filter(query=query, relevance__gt=0)
        .select_related("passage")
        .order_by("-relevance", "passage__ordinal")
    )
    if not relevant:
        return None, "no relevant passage (gold) in the qrels"
    gold = relevant[0].passage
    relevant_ids = {qrel.passage_id for qrel in relevant}
    # The context as shown, sentence by sentence (RELiC) or the query text as one unit (BEIR).
    context = _TextUnits(shown_context(query, context_left, context_right))
    gold_sentences = _TextUnits(_sentences(gold.text))
    chosen = [ItemCandidate(passage=gold, is_gold=True)]
    chosen_texts = {_normalise(gold.text)}
    hits = Hit.objects.filter(run=run, query=query).select_related("passage").order_by("rank")
    for hit in hits.iterator(chunk_size=200):
        passage = hit.passage
        text = _normalise(passage.text)
        if (
            passage.pk in relevant_ids
            or text in chosen_texts
            or _overlaps(passage, gold, gold_sentences)
            or context.repeated_in(passage.text)
        ):
            continue
        chosen.append(ItemCandidate(passage=passage, source_run=run, source_rank=hit.rank))
        chosen_texts.add(text)
        if len(chosen) == k:
            return chosen, ""
    return None, f"run {run.pk} has only {len(chosen) - 1} usable negatives, {k - 1} needed"


def _gold_positions(n_items: int, k: int, seed: int) -> list[int]:
    """Where each item shows its gold: every position equally often (within one), in a seeded
    random order. Independent shuffles can pile the gold on one position by chance (50 items
    gave 11/28/11), which confounds agreement computed per shown position with position bias."""
    positions = [index % k for index in range(n_items)]
    random.Random(f"{seed}:gold-positions").shuffle(positions)
    return positions


def _display_order(chosen: list[ItemCandidate], gold_position: int, seed: int, query: Query) -> list[ItemCandidate]:
    """The gold at its position, the negatives around it in an order shuffled once per item
    (seeded by the study seed and the query)."""
    gold, negatives = chosen[0], list(chosen[1:])
    random.Random(f"{seed}:{query.external_id}").shuffle(negatives)
    return [*negatives[:gold_position], gold, *negatives[gold_position:]]


def _overlaps(passage: Passage, gold: Passage, gold_sentences: _TextUnits) -> bool:
    """Same sentences as the gold: overlapping [start, start + length) ranges of the same book;
    for passages without sentence positions (BEIR), a shared sentence or one inside the other."""
    if _has_position(passage) and _has_position(gold):
        return (
            passage.document_id == gold.document_id
            and passage.start < gold.start + gold.length
            and gold.start < passage.start + passage.length
        )
    return gold_sentences.repeated_in(passage.text)


def _has_position(passage: Passage) -> bool:
    return passage.document_id is not None and passage.start is not None and passage.length is not None


class _TextUnits:
    """Texts to ask whether another text repeats one of them whole, or is itself part of them.
    Comparison ignores case and runs of whitespace; units shorter than MIN_SHARED_CHARS are
    ignored (they recur by chance)."""

    def __init__(self, units: Iterable[str]):
        units = [_normalise(unit) for unit in units]
        self.whole = " ".join(units)
        self.units = {unit for unit in units if len(unit) >= MIN_SHARED_CHARS}

    def repeated_in(self, text: str) -> bool:
        normalised = _normalise(text)
        if len(normalised) >= MIN_SHARED_CHARS and normalised in self.whole:
            return True
        return any(unit in normalised for unit in self.units)


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def _normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()
