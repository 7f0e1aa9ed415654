"""Preference items as the database holds them, and the adaptive designs that add items as
judgments land (the designs themselves: preference_designs.py).

An adaptive study keeps one `PreferenceQuery` per query. Every stored judgment of such a study
(the web's, through annotation.events.judgment_submitted, inside the submitting transaction; an
import's, at the end of its transaction) calls `advance_queries` for the queries it touched:
under the PreferenceQuery row's lock it reads the query's answers so far and, when the design
says so, materialises the next pairs as items. The study row is locked while items are added, so
positions stay unique when several queries move at once; the budget is counted under the query's
lock, so no number of concurrent annotators makes a query exceed it. Answers that chose new pairs
are final at once (annotator_actions refuses to undo them: the pairs asked depend on them).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from retrieval.models import Hit, Passage, Query

from ..models import Item, ItemCandidate, Judgment, PreferenceQuery, Study
from ..preference_schema import answer_groups
from ..selectors import counted_judgments
from .locks import lock_rows
from .preference_designs import Pair, TopK, pair_of, pair_tallies, round_wins
from .studies import PlannedItem

ADAPTIVE = "adaptive"
TOP_K, INFORMATIVE = "top-k", "informative"
# By name: preference_fit loads choix, and choix scipy.stats (over a second); only a study using
# the informative rule pays for it, when its first judgment lands.
LEAST_CERTAIN_PAIRS = "annotation.services.preference_fit.least_certain_pairs"


def design_of(study: Study) -> dict:
    return (study.parameters or {}).get("design") or {}


def is_adaptive(study: Study) -> bool:
    return study.kind == Study.Kind.PREFERENCE and design_of(study).get("design") == ADAPTIVE


def top_k_parameters(design: dict) -> TopK:
    return TopK(design["top_k"], design["pairings"], design["all_pairs_below"])


# --- items ----------------------------------------------------------------------------------------


def planned_item(study_seed: int, query: Query, passages: Sequence[int], labels: dict, sources: dict) -> PlannedItem:
    """An item comparing `passages`, shown in an order shuffled once per item from the study seed,
    the query and the passages compared (`labels`: passage id -> external id); each candidate with
    the best run rank that found it (staff provenance)."""
    order = list(passages)
    random.Random(f"{study_seed}:order:{query.external_id}:{sorted(labels[p] for p in order)}").shuffle(order)
    candidates = []
    for passage in order:
        run_id, rank = sources.get(passage, (None, None))
        candidates.append(ItemCandidate(passage_id=passage, source_run_id=run_id, source_rank=rank))
    return PlannedItem(query, candidates)


def passage_labels(passage_ids: Iterable[int]) -> dict[int, str]:
    return dict(Passage.objects.filter(pk__in=set(passage_ids)).values_list("pk", "external_id"))


def best_sources(run_ids: Sequence[int], query: Query | int, passage_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """passage id -> (run id, rank) of the best rank any of the runs gave it for the query (ties:
    the run listed first)."""
    order = {run_id: position for position, run_id in enumerate(run_ids)}
    found: dict[int, tuple[int, int]] = {}
    hits = Hit.objects.filter(run_id__in=run_ids, query=query, passage_id__in=set(passage_ids)).values_list(
        "passage_id", "run_id", "rank"
    )
    for passage_id, run_id, rank in sorted(hits, key=lambda hit: (hit[2], order[hit[1]])):
        found.setdefault(passage_id, (run_id, rank))
    return found


def _add_items(study: Study, query: Query, groups: Sequence[Sequence[int]]) -> int:
    """Materialise one item per group of passages after the study's existing items (the study row
    locked, so concurrent stages of other queries take other positions)."""
    if not groups:
        return 0
    lock_rows(Study.objects.filter(pk=study.pk))
    last = Item.objects.filter(study=study).aggregate(last=Max("position"))["last"]
    start = 0 if last is None else last + 1
    passages = {passage for group in groups for passage in group}
    labels = passage_labels(passages)
    sources = best_sources((study.parameters or {}).get("runs") or [], query, passages)
    planned = [planned_item(study.seed, query, group, labels, sources) for group in groups]
    items = Item.objects.bulk_create(
        [Item(study=study, query=query, position=start + offset) for offset in range(len(planned))]
    )
    for item, entry in zip(items, planned, strict=True):
        for position, candidate in enumerate(entry.candidates):
            candidate.item, candidate.position = item, position
    ItemCandidate.objects.bulk_create([candidate for entry in planned for candidate in entry.candidates])
    return len(items)


# --- what has been answered ---------------------------------------------------------------------------


def query_answers(study: Study, query_id: int) -> tuple[list[tuple[list[int], list | None]], dict[Pair, int]]:
    """The query's counted answers as (passage ids in display order, tie groups or None for
    "both bad"), and per pair asked, how many live (not voided) judgments its items have: what
    says whether a pair is done, whoever's answers the statistics count."""
    shown: dict[int, list[int]] = defaultdict(list)
    for item_id, passage_id in (
        ItemCandidate.objects.filter(item__study=study, item__query_id=query_id)
        .order_by("item_id", "position")
        .values_list("item_id", "passage_id")
    ):
        shown[item_id].append(passage_id)
    answers = [
        (shown[item_id], answer_groups(label))
        for item_id, label in counted_judgments(study).filter(item__query_id=query_id).values_list("item_id", "label")
    ]
    live: dict[Pair, int] = defaultdict(int)
    for passages in shown.values():
        if len(passages) == 2:
            live.setdefault(pair_of(*passages), 0)
    for item_id in Judgment.objects.filter(item__study=study, item__query_id=query_id, voided=False).values_list(
        "item_id", flat=True
    ):
        passages = shown[item_id]
        if len(passages) == 2:
            live[pair_of(*passages)] += 1
    return answers, live


def open_items(study: Study, query_id: int) -> int:
    """How many of the query's items still lack some of their judgments (voided ones not counted)."""
    live = Count("judgments", filter=Q(judgments__voided=False))
    return (
        Item.objects.filter(study=study, query_id=query_id)
        .annotate(live=live)
        .filter(live__lt=study.judgments_per_item)
        .count()
    )


# --- adaptive designs -----------------------------------------------------------------------------------


def advance_queries(study: Study, query_ids: Iterable[int]) -> int:
    """Let each query's design react to its answers so far; returns the items added. Call inside
    the transaction that stored the answers."""
    if not is_adaptive(study):
        return 0
    added = 0
    for query_id in sorted(set(query_ids)):
        lock_rows(PreferenceQuery.objects.filter(study=study, query_id=query_id))
        state = PreferenceQuery.objects.filter(study=study, query_id=query_id).select_related("query").first()
        if state is None or state.status != PreferenceQuery.Status.OPEN:
            continue
        before = (state.stage, state.status, state.pairs)
        added += _advance(study, state)
        if (state.stage, state.status, state.pairs) != before:
            state.moved_at = timezone.now()  # these answers decided something: they are final now
        state.save()
    return added


def _advance(study: Study, state: PreferenceQuery) -> int:
    design = design_of(study)
    # Most answers change nothing: a round still has pairs to judge, or the batch is full. One
    # count says so before the query's answers are read.
    waiting = open_items(study, state.query_id)
    if waiting and (design["rule"] == TOP_K or waiting >= design["batch"] or _room(design, state) == 0):
        return 0
    answers, live = query_answers(study, state.query_id)
    tallies = pair_tallies(answers)
    needed = study.judgments_per_item
    asked = set(live)
    if design["rule"] == TOP_K:
        complete = {pair for pair, count in live.items() if count >= needed}
        return _advance_top_k(study, state, design, tallies, complete, asked)
    open_pairs = sum(1 for count in live.values() if count < needed)
    return _advance_informative(study, state, design, tallies, asked, open_pairs)


def _advance_top_k(
    study: Study, state: PreferenceQuery, design: dict, tallies, complete: set[Pair], asked: set[Pair]
) -> int:
    """Close every stage whose pairs are all judged and open the next (several at once when a
    round needs no new pair: all of them were asked before)."""
    procedure = top_k_parameters(design)
    added = 0
    previous_wins: dict[int, float] = {}
    while all(tuple(pair) in complete for pair in state.stage_pairs):
        pairs = [tuple(pair) for pair in state.stage_pairs]
        wins = round_wins(pairs, tallies) if pairs else previous_wins
        final = len(state.contenders) <= procedure.all_pairs_below
        if final or state.stage_cut:
            state.found = [[passage, score] for passage, score in procedure.top(state.contenders, wins)]
            state.status = PreferenceQuery.Status.BUDGET if state.stage_cut else PreferenceQuery.Status.DONE
            return added
        contenders = procedure.survivors(state.contenders, wins)
        added += open_round(study, state, contenders, design, asked)
        asked |= {tuple(pair) for pair in state.stage_pairs}
        previous_wins = wins
    return added


def open_round(study: Study, state: PreferenceQuery, contenders: list[int], design: dict, asked: set[Pair]) -> int:
    """Make `contenders` the next round of the top-k procedure: draw its pairs, materialise those
    never asked before, as many as the budget leaves room for (a round cut short ends the query
    when it is judged)."""
    procedure = top_k_parameters(design)
    rng = random.Random(f"{study.seed}:round:{state.query.external_id}:{state.stage + 1}")
    _final, pairs = procedure.round_pairs(contenders, rng)
    new = [pair for pair in pairs if pair not in asked]
    room = _room(design, state)
    state.stage_cut = len(new) > room
    if state.stage_cut:
        new = new[:room]
        kept = set(new) | asked
        pairs = [pair for pair in pairs if pair in kept]
    state.contenders, state.stage_pairs, state.stage = contenders, [list(p) for p in pairs], state.stage + 1
    state.pairs += len(new)
    return _add_items(study, state.query, new)


def _advance_informative(
    study: Study, state: PreferenceQuery, design: dict, tallies, asked: set[Pair], open_pairs: int
) -> int:
    """Keep `batch` pairs open per query: the least certain ones under the Bradley-Terry fit of
    the answers so far, each pair once, until the budget is spent."""
    wanted = min(design["batch"] - open_pairs, _room(design, state))
    chosen = []
    if wanted > 0:
        rng = random.Random(f"{study.seed}:informative:{state.query.external_id}:{state.pairs}")
        chosen = import_string(LEAST_CERTAIN_PAIRS)(state.pool, tallies, asked, wanted, rng, design["alpha"])
    state.pairs += len(chosen)
    if not chosen and not open_pairs:
        spent = _room(design, state) == 0
        state.status = PreferenceQuery.Status.BUDGET if spent else PreferenceQuery.Status.DONE
    return _add_items(study, state.query, chosen)


def _room(design: dict, state: PreferenceQuery) -> int:
    budget = design.get("budget")
    return max(0, budget - state.pairs) if budget is not None else 1 << 30


def adaptive_progress(study: Study) -> list[dict]:
    """Staff: each query's adaptive state (stage, contenders, pairs asked against the budget,
    status, the procedure's top passages by external id)."""
    states = list(PreferenceQuery.objects.filter(study=study).select_related("query").order_by("pk"))
    labels = passage_labels(passage for state in states for passage, _ in state.found)
    budget = design_of(study).get("budget")
    return [
        {
            "query": state.query.external_id,
            "status": state.status,
            "stage": state.stage,
            "contenders": len(state.contenders),
            "pairs": state.pairs,
            "budget": budget,
            "found": [{"passage": labels.get(passage, str(passage)), "wins": wins} for passage, wins in state.found],
        }
        for state in states
    ]
