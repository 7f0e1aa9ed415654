"""Pools: the (query, passage) pairs a relevance study judges, chosen from several runs by a
strategy (annotation/pooling.py: depth, rrf, rbp, mtf) under a budget, stored with how each pair
entered the pool, grown when a run is added, and, for move-to-front, drawn as judgments land.

Every pair any run retrieved within the pool's depth is a `PooledPair` (judged or not), with one
`PoolHit` per run that ranks it; a pair becomes an item when it is drawn. The static strategies
draw once, at creation (and again when a run is added): the first pairs of their order that fit
the budget, shown in the study's seeded random order like any relevance study (TREC shows its
assessors pools in docid order for the same reason: a judge should get no cue from the rank).

Move-to-front draws as it learns. Its items must exist before anyone can claim them, so:
- at creation, and whenever an item is decided, the pool tops up to `lookahead` open items
  (drawn, undecided, with a free slot);
- an annotator who finds nothing to claim makes the pool draw one more pair for them
  (`draw_for_claim`, from the claim path), so several annotators are never starved;
- an item is decided when its last judgment lands (`record_completion`, on the item_complete
  event, inside the submitting transaction): relevant when its majority label (ties to the
  lower label, as export_qrels) is above 0; the outcome goes to the source that drew it.
Every draw and decision runs under the pool's row lock (SELECT ... FOR UPDATE; SQLite
serialises writers), numbered by one counter (`Pool.events`), and never takes the pool past its
budget, however many annotators judge at once.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from django.db import transaction
from django.db.models import Count, Max, Q

from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Hit, Run

from ..models import LIVE_ASSIGNMENT_STATES, Assignment, Item, ItemCandidate, Judgment, Pool, PooledPair, PoolHit, Study
from ..pooling import (
    DEFAULT_RBP_P,
    DEFAULT_RRF_K,
    STRATEGY_NAMES,
    Candidate,
    MoveToFront,
    majority_label,
    static_strategy,
    within_budget,
)
from .studies import PlannedItem, SkippedQuery, StudyCreation, store_study, validate_run

MAX_LOOKAHEAD = 100
MAX_RRF_K = 10_000
# Items a label study may have, and pairs its pool may hold, judged or not.
MAX_ITEMS = 20_000
MAX_POOL_PAIRS = 200_000


@dataclass(frozen=True)
class PoolSettings:
    """How a relevance study's pairs are chosen: the strategy, the budget (judged pairs in all
    and per query; None: no limit) and the strategies' parameters."""

    strategy: str = Pool.Strategy.DEPTH
    budget: int | None = None
    budget_per_query: int | None = None
    rrf_k: int = DEFAULT_RRF_K
    rbp_p: float = DEFAULT_RBP_P
    lookahead: int = 1

    @property
    def adaptive(self) -> bool:
        return self.strategy == Pool.Strategy.MTF

    @property
    def draws_everything(self) -> bool:
        """Today's pooling: every pair of the runs' top k is judged."""
        return self.strategy == Pool.Strategy.DEPTH and self.budget is None and self.budget_per_query is None

    def validate(self, *, use_pools: bool) -> None:
        if self.strategy not in STRATEGY_NAMES:
            raise InputError(f"must be one of {', '.join(STRATEGY_NAMES)}, got {self.strategy!r}", field="pool")
        for name in ("budget", "budget_per_query"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_ITEMS:
                raise InputError(f"must be between 1 and {MAX_ITEMS}, got {value}", field=name)
        if not 0 <= self.rrf_k <= MAX_RRF_K:
            raise InputError(f"must be between 0 and {MAX_RRF_K}, got {self.rrf_k}", field="rrf_k")
        if not 0 < self.rbp_p < 1:
            raise InputError(f"must be strictly between 0 and 1, got {self.rbp_p}", field="rbp_p")
        if not 1 <= self.lookahead <= MAX_LOOKAHEAD:
            raise InputError(f"must be between 1 and {MAX_LOOKAHEAD}, got {self.lookahead}", field="lookahead")
        if use_pools and not self.draws_everything:
            raise InputError(
                "a query's own pool has no ranks to order or cut: use the queries' pools with the depth "
                "strategy and no budget",
                field="use_pools",
            )

    def parameters(self) -> dict:
        """What the study's parameters record of the request (the strategy's own parameter only)."""
        recorded = {"pool": self.strategy, "budget": self.budget, "budget_per_query": self.budget_per_query}
        if self.strategy == Pool.Strategy.RRF:
            recorded["rrf_k"] = self.rrf_k
        if self.strategy == Pool.Strategy.RBP:
            recorded["rbp_p"] = self.rbp_p
        if self.adaptive:
            recorded["lookahead"] = self.lookahead
        return recorded


def is_adaptive(study: Study) -> bool:
    """Whether the study's items are drawn as judgments land (read from the study row itself:
    the claim path asks on every request and must not pay a query for it)."""
    return (study.parameters or {}).get("pool") == Pool.Strategy.MTF


# --- creation --------------------------------------------------------------------------------------


def create_pooled_study(
    planned: list[PlannedItem],
    skipped: list[SkippedQuery],
    *,
    settings: PoolSettings,
    runs: Sequence[Run],
    depth: int,
    annotators,
    parameters: dict,
    fields: dict,
    progress: Progress = no_progress,
) -> StudyCreation:
    """Store a relevance study whose candidate pairs are `planned` (in planning order: queries in
    the seeded order, each query's pairs as its runs found them) and its pool: the static
    strategies' chosen pairs become items at once, shown in a seeded random order; move-to-front
    draws its first `lookahead` pairs. One transaction."""
    query_order = list(dict.fromkeys(entry.query.pk for entry in planned))
    candidates = [_planned_candidate(entry) for entry in planned]
    items_now: list[PlannedItem] = []
    if not settings.adaptive:
        ordered = _static_order(settings, candidates, query_order)
        chosen = {(c.query, c.passage) for c in within_budget(ordered, settings.budget, settings.budget_per_query)}
        items_now = [
            entry for entry, candidate in zip(planned, candidates) if (candidate.query, candidate.passage) in chosen
        ]
        random.Random(f"{fields['seed']}:items").shuffle(items_now)
    with transaction.atomic():
        creation = store_study(
            # Their sources go to the pool (below), not to the study's parameters.
            [PlannedItem(entry.query, entry.candidates) for entry in items_now],
            skipped,
            annotators=annotators,
            parameters=parameters,
            progress=progress,
            kind=Study.Kind.RELEVANCE,
            candidates_per_item=1,
            **fields,
        )
        pool = Pool.objects.create(
            study=creation.study,
            strategy=settings.strategy,
            depth=depth,
            budget=settings.budget,
            budget_per_query=settings.budget_per_query,
            rrf_k=settings.rrf_k,
            rbp_p=settings.rbp_p,
            lookahead=settings.lookahead,
            runs=[run.pk for run in runs],
            queries=query_order,
        )
        stored = Item.objects.filter(study=creation.study).values_list("query_id", "candidates__passage_id", "pk")
        item_of = {(query, passage): item for query, passage, item in stored}
        _store_pairs(pool, planned, candidates, item_of)
        if settings.adaptive:
            items = _top_up(pool, creation.study)
        else:
            _store_order(pool)
            items = creation.items
    if settings.draws_everything:  # today's request (every pair judged) keeps today's summary
        return StudyCreation(creation.study, items, creation.skipped)
    summary = {
        "strategy": pool.strategy,
        "pairs": len(planned),
        "budget": pool.budget,
        "budget_per_query": pool.budget_per_query,
    }
    return StudyCreation(creation.study, items, creation.skipped, pool=summary)


def _planned_candidate(entry: PlannedItem) -> Candidate:
    passage = entry.candidates[0].passage
    ranks = {source["run"]: source["rank"] for source in entry.sources if "run" in source}
    return Candidate(entry.query.pk, passage.pk, passage.external_id, ranks)


def _static_order(settings: PoolSettings, candidates: Iterable[Candidate], query_order: Sequence[int]):
    return static_strategy(settings.strategy, rrf_k=settings.rrf_k, rbp_p=settings.rbp_p).order(candidates, query_order)


def _store_pairs(pool: Pool, planned: list[PlannedItem], candidates: list[Candidate], item_of: dict) -> None:
    pairs = PooledPair.objects.bulk_create(
        PooledPair(
            pool=pool,
            query_id=candidate.query,
            passage_id=candidate.passage,
            item_id=item_of.get((candidate.query, candidate.passage)),
            pool_position=next((source["pool"] for source in entry.sources if "pool" in source), None),
        )
        for entry, candidate in zip(planned, candidates)
    )
    PoolHit.objects.bulk_create(
        PoolHit(pair=pair, run_id=run, rank=rank)
        for pair, candidate in zip(pairs, candidates)
        for run, rank in candidate.ranks.items()
    )


def _store_order(pool: Pool) -> list[PooledPair]:
    """Each pair's place in the static strategy's order over the whole pool, and its fusion
    score; returns the pairs in that order."""
    pairs = {(pair.query_id, pair.passage_id): pair for pair in PooledPair.objects.filter(pool=pool)}
    ordered = _static_order(settings_of(pool), _pool_candidates(pool), pool.queries)
    strategy = static_strategy(pool.strategy, rrf_k=pool.rrf_k, rbp_p=pool.rbp_p)
    result = []
    for place, candidate in enumerate(ordered, start=1):
        pair = pairs[candidate.query, candidate.passage]
        pair.order, pair.score = place, strategy.score(candidate.ranks) if candidate.ranks else None
        result.append(pair)
    PooledPair.objects.bulk_update(result, ["order", "score"], batch_size=2000)
    return result


def settings_of(pool: Pool) -> PoolSettings:
    return PoolSettings(pool.strategy, pool.budget, pool.budget_per_query, pool.rrf_k, pool.rbp_p, pool.lookahead)


def _pool_candidates(pool: Pool) -> list[Candidate]:
    """Every pair of the pool as a strategy sees it."""
    candidates = {
        pk: Candidate(query, passage, key)
        for pk, query, passage, key in PooledPair.objects.filter(pool=pool).values_list(
            "pk", "query_id", "passage_id", "passage__external_id"
        )
    }
    for pair, run, rank in PoolHit.objects.filter(pair__pool=pool).values_list("pair_id", "run_id", "rank"):
        candidates[pair].ranks[run] = rank
    return list(candidates.values())


# --- move-to-front: drawing and deciding ---------------------------------------------------------


def draw_for_claim(study: Study) -> list[int]:
    """Called by the queue when the annotator found nothing to claim: in an open move-to-front
    study with budget left, draw one more pair and return its item's id (else nothing)."""
    if not is_adaptive(study) or study.status != Study.Status.OPEN:
        return []
    with transaction.atomic():
        pool = _locked_pool(study)
        drawn = _draw(pool, study, 1)
        pool.save(update_fields=["state", "events"])
    return [item.pk for item in drawn]


def record_completion(item: Item) -> None:
    """The item just got its last judgment: decide its pair (relevant or not), tell the strategy,
    and top the pool up. A pair is decided once: a judgment voided and replaced later does not
    rewrite what the next draws were chosen with."""
    study = item.study
    if not is_adaptive(study):
        return
    with transaction.atomic():
        pool = _locked_pool(study)
        pair = PooledPair.objects.filter(item=item, decided__isnull=True, drawn_from__isnull=False).first()
        if pair is None:
            return
        labels = list(Judgment.objects.filter(item=item, voided=False).values_list("label", flat=True))
        pair.relevant = majority_is_relevant(labels)
        pool.events += 1
        pair.decided = pool.events
        pair.save(update_fields=["relevant", "decided"])
        strategy = _move_to_front(pool)
        strategy.record((pair.query_id, pair.drawn_from_id), pair.relevant)
        pool.state = strategy.state()
        _top_up(pool, study)


def settle_completed(study: Study) -> int:
    """Decide every drawn pair whose item is complete but undecided (judgments that arrived
    without the web's item_complete event: imports), in item order; returns how many."""
    if not is_adaptive(study):
        return 0
    complete = (
        Item.objects.filter(study=study, pooled_pair__decided__isnull=True, pooled_pair__drawn_from__isnull=False)
        .annotate(done=Count("assignments", filter=Q(assignments__state=Assignment.State.SUBMITTED)))
        .filter(done__gte=study.judgments_per_item)
        .order_by("position")
    )
    settled = 0
    for item in complete:
        item.study = study
        record_completion(item)
        settled += 1
    return settled


def majority_is_relevant(labels: Sequence) -> bool:
    """Relevant when the majority label (ties: the lowest of the tied) is above 0, the scales'
    "not relevant": the pair's qrel as export_qrels' majority writes it is > 0."""
    labels = [label for label in labels if isinstance(label, int | float)]
    return bool(labels) and majority_label(labels) > 0


def _locked_pool(study: Study) -> Pool:
    return Pool.objects.select_for_update().get(study=study)


def _move_to_front(pool: Pool) -> MoveToFront:
    return MoveToFront.from_state(pool.queries, pool.runs, pool.state)


def _top_up(pool: Pool, study: Study) -> int:
    """Draw until `lookahead` drawn, undecided items have a free slot (or the budget or the
    pairs run out); returns how many were drawn. Saves the pool."""
    live = Count("assignments", filter=Q(assignments__state__in=LIVE_ASSIGNMENT_STATES))
    open_items = (
        Item.objects.filter(pooled_pair__pool=pool, pooled_pair__decided__isnull=True)
        .exclude(role=Item.Role.QUALIFICATION)  # a qualification question is never judged as work
        .annotate(live=live)
        .filter(live__lt=study.judgments_per_item)
        .count()
    )
    drawn = _draw(pool, study, max(0, pool.lookahead - open_items))
    pool.save(update_fields=["state", "events"])
    return len(drawn)


def _draw(pool: Pool, study: Study, count: int) -> list[Item]:
    """Up to `count` pairs drawn by move-to-front (call with the pool locked), each made an item
    at the end of the study; never past the budget. The caller saves the pool."""
    if count < 1:
        return []
    strategy = _move_to_front(pool)
    drawn_pairs = PooledPair.objects.filter(pool=pool, item__isnull=False)
    per_query = Counter(dict(drawn_pairs.values("query_id").annotate(n=Count("pk")).values_list("query_id", "n")))
    total = sum(per_query.values())
    position = _next_position(study)
    items = []
    for _ in range(count):
        if pool.budget is not None and total >= pool.budget:
            break
        source = strategy.next_source(_open_sources(pool, per_query), per_query)
        if source is None:
            break
        query, run = source
        hit = (
            PoolHit.objects.filter(pair__pool=pool, pair__query_id=query, run_id=run, pair__item__isnull=True)
            .select_related("pair")
            .order_by("rank", "pk")
            .first()
        )
        pool.events += 1
        item = _materialise(study, hit.pair, position, pool.runs)
        PooledPair.objects.filter(pk=hit.pair_id).update(item=item, order=pool.events, drawn_from_id=run)
        items.append(item)
        per_query[query] += 1
        total += 1
        position += 1
    pool.state = strategy.state()
    return items


def _next_position(study: Study) -> int:
    """The position after the study's last item (new items go at the end of the queue's order)."""
    last = Item.objects.filter(study=study).aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def _open_sources(pool: Pool, per_query: Counter) -> set[tuple[int, int]]:
    """The (query, run) sources with a pair not yet drawn, whose query is under its budget."""
    undrawn = PoolHit.objects.filter(pair__pool=pool, pair__item__isnull=True)
    sources = set(undrawn.values_list("pair__query_id", "run_id").distinct())
    cap = pool.budget_per_query
    return {source for source in sources if cap is None or per_query[source[0]] < cap}


def _materialise(study: Study, pair: PooledPair, position: int, run_order: Sequence[int]) -> Item:
    """The pair as an item at `position`, its candidate keeping the pair's best source (lowest
    rank; on a tie the run pooled first), like the items drawn at creation."""
    item = Item.objects.create(study=study, query_id=pair.query_id, position=position)
    place = {run: index for index, run in enumerate(run_order)}
    ranks = sorted(pair.hits.values_list("rank", "run_id"), key=lambda hit: (hit[0], place.get(hit[1], len(place))))
    best_rank, best_run = ranks[0] if ranks else (None, None)
    ItemCandidate.objects.create(
        item=item, passage_id=pair.passage_id, position=0, source_run_id=best_run, source_rank=best_rank
    )
    return item


# --- growing a pool ------------------------------------------------------------------------------


@dataclass
class PoolExtension:
    study: Study
    extension: int
    runs: list[int]
    pairs_added: int  # pairs no run of the pool had retrieved
    pairs_already_pooled: int  # pairs the new runs share with the pool (recorded as their hits too)
    items_added: int
    items: int
    judged_items: int  # items with judgments, kept and counted
    budget: int | None
    budget_per_query: int | None

    def summary(self) -> dict:
        return {"study": self.study.pk, **{key: value for key, value in asdict(self).items() if key != "study"}}


def extend_pool(
    study: Study,
    runs: Sequence[Run],
    *,
    budget: int | None = None,
    budget_per_query: int | None = None,
    progress: Progress = no_progress,
) -> PoolExtension:
    """Add `runs` to the study's pool: their top-depth pairs not yet pooled become new pairs,
    those already pooled record the new run's rank too; nothing judged is touched. `budget` adds
    that many judged pairs to the pool's budget (to the pairs drawn so far, when it had none);
    `budget_per_query` raises the per-query budget. Then the strategy draws what it now wants:
    the static ones the first undrawn pairs of their new order that fit the budget (depth
    without a budget: every new pair), move-to-front tops up (the new runs' sources start at
    priority 0, as every source did). One transaction; InputError names the field."""
    pool = Pool.objects.filter(study=study).first()
    if pool is None:
        raise InputError(f"study {study.pk} has no pool: only relevance studies drawn from runs grow", field="study")
    runs = list({run.pk: run for run in runs}.values())
    if not runs:
        raise InputError("name at least one run to add", field="runs")
    for run in runs:
        validate_run(run, study.collection, "runs")
        if run.pk in pool.runs:
            raise InputError(f"run {run.pk} is already in the pool", field="runs")
    if budget is not None and budget < 1:
        raise InputError(f"must be at least 1, got {budget}", field="budget")
    if budget_per_query is not None:
        if budget_per_query < 1:
            raise InputError(f"must be at least 1, got {budget_per_query}", field="budget_per_query")
        if pool.budget_per_query is None:
            raise InputError("the pool has no budget per query to raise", field="budget_per_query")
    with transaction.atomic():
        pool = _locked_pool(study)
        pool.extensions += 1
        step = pool.extensions
        if budget is not None:
            drawn_so_far = PooledPair.objects.filter(pool=pool, item__isnull=False).count()
            pool.budget = (pool.budget if pool.budget is not None else drawn_so_far) + budget
            if pool.budget > MAX_ITEMS:
                raise InputError(f"the budget would exceed {MAX_ITEMS} judged pairs", field="budget")
        if budget_per_query is not None:
            pool.budget_per_query += budget_per_query
        added, shared = _pool_new_hits(pool, runs, step)
        progress(0.5, f"{added} new pairs, {shared} already pooled")
        pool.runs = [*pool.runs, *(run.pk for run in runs)]
        pool.save()
        adaptive = pool.strategy == Pool.Strategy.MTF
        items_added = _top_up(pool, study) if adaptive else _draw_static(pool, study, step)
        study.parameters.setdefault("extensions", []).append(
            {"runs": [run.pk for run in runs], "budget": budget, "budget_per_query": budget_per_query}
        )
        study.save(update_fields=["parameters"])
    progress(1.0, f"{items_added} items added")
    items = Item.objects.filter(study=study)
    return PoolExtension(
        study=study,
        extension=step,
        runs=[run.pk for run in runs],
        pairs_added=added,
        pairs_already_pooled=shared,
        items_added=items_added,
        items=items.count(),
        judged_items=items.filter(judgments__voided=False).distinct().count(),
        budget=pool.budget,
        budget_per_query=pool.budget_per_query,
    )


def _pool_new_hits(pool: Pool, runs: Sequence[Run], step: int) -> tuple[int, int]:
    """Record the runs' top-depth hits for the pool's queries: (new pairs, pairs already pooled)."""
    pairs = {
        (query, passage): pk
        for pk, query, passage in PooledPair.objects.filter(pool=pool).values_list("pk", "query_id", "passage_id")
    }
    hits = (
        Hit.objects.filter(run__in=runs, query_id__in=pool.queries, rank__lte=pool.depth)
        .order_by("run_id", "query_id", "rank")
        .values_list("run_id", "query_id", "passage_id", "rank")
    )
    run_place = {run.pk: index for index, run in enumerate(runs)}
    found = sorted(hits, key=lambda hit: (run_place[hit[0]], hit[1], hit[3]))
    new_pairs = {}
    for _, query, passage, _ in found:
        if (query, passage) not in pairs and (query, passage) not in new_pairs:
            new_pairs[query, passage] = PooledPair(pool=pool, query_id=query, passage_id=passage, extension=step)
    limit = MAX_ITEMS if pool.budget is None else MAX_POOL_PAIRS
    if len(pairs) + len(new_pairs) > limit:
        what = "pairs to judge without a budget" if pool.budget is None else "pairs"
        raise InputError(f"the pool would hold more than {limit} {what}", field="runs")
    for pair in PooledPair.objects.bulk_create(new_pairs.values()):
        pairs[pair.query_id, pair.passage_id] = pair.pk
    PoolHit.objects.bulk_create(
        PoolHit(pair_id=pairs[query, passage], run_id=run, rank=rank, extension=step)
        for run, query, passage, rank in found
    )
    shared = len({(query, passage) for _, query, passage, _ in found} - set(new_pairs))
    return len(new_pairs), shared


def _draw_static(pool: Pool, study: Study, step: int) -> int:
    """Reorder the whole pool and draw the undrawn pairs that now fit the budget, as items at
    the end of the study in a seeded random order of their own; returns how many."""
    ordered = _store_order(pool)
    drawn = [pair for pair in ordered if pair.item_id is not None]
    per_query = Counter(pair.query_id for pair in drawn)
    room = None if pool.budget is None else max(0, pool.budget - len(drawn))
    chosen = []
    for pair in ordered:
        if room is not None and len(chosen) == room:
            break
        if pair.item_id is not None:
            continue
        if pool.budget_per_query is not None and per_query[pair.query_id] >= pool.budget_per_query:
            continue
        per_query[pair.query_id] += 1
        chosen.append(pair)
    random.Random(f"{study.seed}:extension:{step}").shuffle(chosen)
    position = _next_position(study)
    for offset, pair in enumerate(chosen):
        item = _materialise(study, pair, position + offset, pool.runs)
        PooledPair.objects.filter(pk=pair.pk).update(item=item)
    return len(chosen)
