"""Retrieval metrics of a run: by default recall@k, mean rank, MRR@10, nDCG@10 and N-RODCG@10,
each with a standard error, overall and per quote length (RELiC's Table A9); any cutoff the user
asks for, in ir-measures / trec_eval naming (`R@20 nDCG@10 MRR@100 MAP P@5 N-RODCG@1`), per
query and broken down by any query field.

The per-query functions take plain numbers, so each can be checked against a reference
(pytrec_eval, the papers' definitions); `evaluate_run` gathers those numbers from the database.
Ranks come from `RunQuery.relevant_ranks`, exact over the whole candidate set, so recall@k and
mean rank are exact even beyond the depth of the stored hits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .models import Hit, Passage, Qrel, Query, Run
from .selectors import require_done
from .services.candidates import candidate_sets

RECALL_CUTOFFS = (1, 3, 5, 10, 50, 100)
CUTOFF = 10
# Plot Retrieval's field of vision: a chunk this many sentence positions or more from every gold
# chunk earns nothing.
RODCG_ALPHA = 5
METRICS = (
    *(f"recall@{k}" for k in RECALL_CUTOFFS),
    "mean_rank",
    f"mrr@{CUTOFF}",
    f"ndcg@{CUTOFF}",
    f"n_rodcg@{CUTOFF}",
)
# ir-measures / trec_eval names (any case) -> our key stem; the cutoff rule of each.
METRIC_NAMES = {
    "r": "recall",
    "recall": "recall",
    "p": "p",
    "precision": "p",
    "ndcg": "ndcg",
    "rr": "mrr",
    "mrr": "mrr",
    "map": "map",
    "ap": "map",
    "n-rodcg": "n_rodcg",
    "n_rodcg": "n_rodcg",
    "mean_rank": "mean_rank",
    "meanrank": "mean_rank",
}
NEEDS_CUTOFF = {"recall", "p", "ndcg", "n_rodcg"}
NO_CUTOFF = {"map", "mean_rank"}
METRIC_PATTERN = re.compile(r"^(?P<name>[A-Za-z_-]+)(?:@(?P<cutoff>\d+))?$")


def parse_metrics(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Metric keys from names such as "R@20 nDCG@10 MRR@100 MAP P@5 N-RODCG@1" (or our own keys,
    "recall@20"), separated by spaces or commas; None or empty: the default METRICS. Keys are in
    the existing style: recall@20, ndcg@10, mrr@100, map, p@5, n_rodcg@1 (mrr without a cutoff:
    the full ranking)."""
    tokens = text.replace(",", " ").split() if isinstance(text, str) else list(text or [])
    if not tokens:
        return METRICS
    keys = []
    for token in tokens:
        match = METRIC_PATTERN.match(token)
        stem = METRIC_NAMES.get(match["name"].lower()) if match else None
        if stem is None:
            raise InputError(
                f"unknown metric {token!r}; use R@k, P@k, nDCG@k, MRR@k, MAP, N-RODCG@k or mean_rank", field="metrics"
            )
        cutoff = match["cutoff"]
        if cutoff is not None and (stem in NO_CUTOFF or int(cutoff) < 1):
            raise InputError(
                f"{token!r}: {stem} takes no cutoff" if stem in NO_CUTOFF else f"{token!r}: cutoff below 1",
                field="metrics",
            )
        if cutoff is None and stem in NEEDS_CUTOFF:
            raise InputError(f"{token!r} needs a cutoff, e.g. {match['name']}@10", field="metrics")
        key = stem if cutoff is None else f"{stem}@{int(cutoff)}"
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def _cutoff(key: str) -> int | None:
    return int(key.partition("@")[2]) if "@" in key else None


# --- one query ---------------------------------------------------------------------------------


def recall_at(relevant_ranks: Iterable[int], relevant_count: int, k: int) -> float:
    """Share of the query's relevant passages ranked in the top k. `relevant_count` counts every
    relevant passage, also those outside the candidate set (which no ranking can retrieve)."""
    return sum(1 for rank in relevant_ranks if rank <= k) / relevant_count


def best_rank(relevant_ranks: Iterable[int], candidates: int) -> int:
    """Rank of the best-ranked relevant passage, for mean rank. A query whose relevant passages
    are all outside its candidate set counts as ranking them just past the end (candidates + 1),
    as if they had been appended last."""
    return min(relevant_ranks, default=candidates + 1)


def reciprocal_rank_at(relevant_ranks: Iterable[int], k: int | None) -> float:
    """1 / the best relevant rank, 0 beyond k (k None: no cutoff)."""
    rank = min(relevant_ranks, default=None)
    return 1.0 / rank if rank is not None and (k is None or rank <= k) else 0.0


def precision_at(relevant_ranks: Iterable[int], k: int) -> float:
    """Share of the top k that is relevant (trec_eval's P_k: the divisor is k, always)."""
    return sum(1 for rank in relevant_ranks if rank <= k) / k


def average_precision(relevant_ranks: Iterable[int], relevant_count: int) -> float:
    """trec_eval's AP: the precision at each relevant passage's rank, summed, over all the
    query's relevant passages (one not ranked adds 0)."""
    ranks = sorted(relevant_ranks)
    return sum(found / rank for found, rank in enumerate(ranks, start=1)) / relevant_count


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain, the gain at rank r divided by log2(r + 1)."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at(ranked_relevance: dict[int, int], relevances: Iterable[int], k: int) -> float:
    """nDCG@k with gain = relevance. `ranked_relevance` maps the ranks of relevant passages to
    their relevance; the ideal ranking orders all of the query's relevances (`relevances`)."""
    gains = [0.0] * k
    for rank, relevance in ranked_relevance.items():
        if rank <= k:
            gains[rank - 1] = relevance
    ideal = dcg(sorted(relevances, reverse=True)[:k])
    return dcg(gains) / ideal if ideal else 0.0


def rodcg_gain(distance: float, alpha: float = RODCG_ALPHA) -> float:
    """Plot Retrieval's f(d): 1 / (d + 1) for a chunk within alpha positions of a gold chunk."""
    return 1.0 / (distance + 1.0) if distance < alpha else 0.0


def n_rodcg_at(retrieved_gains: Sequence[float], candidate_gains: Iterable[float], k: int) -> float:
    """N-RODCG@k (Plot Retrieval, eq. 2-4): the DCG of f(d) over the top k, divided by the DCG
    of the best possible ranking of the candidate set (its k largest gains first)."""
    ideal = dcg(sorted(candidate_gains, reverse=True)[:k])
    return dcg(list(retrieved_gains)[:k]) / ideal if ideal else 0.0


def position(start: int | None, length: int | None) -> float | None:
    """A window's place in its book: the mean of its sentence indexes (Plot Retrieval's s_i)."""
    if start is None:
        return None
    return start + ((length or 1) - 1) / 2


@dataclass(frozen=True)
class Located:
    """A passage as N-RODCG sees it: which book, and where in it (None for BEIR passages)."""

    pk: int
    document_id: int | None
    position: float | None


class CandidatePositions:
    """A candidate set's passages by book and position, to find each gold chunk's neighbours."""

    def __init__(self, candidates: Sequence[Located], alpha: float = RODCG_ALPHA):
        self.alpha = alpha
        self.ids = {candidate.pk for candidate in candidates}
        self.by_document: dict[int | None, list[Located]] = {}
        for candidate in sorted((c for c in candidates if c.position is not None), key=lambda c: c.position):
            self.by_document.setdefault(candidate.document_id, []).append(candidate)
        self.positions = {
            document: np.array([c.position for c in located]) for document, located in self.by_document.items()
        }

    def gains(self, golds: Sequence[Located]) -> dict[int, float]:
        """f(d) of every candidate with a non-zero gain, by passage id. d is the distance to the
        nearest gold chunk in the same book; a passage without a position is distance 0 from
        itself only, so on BEIR collections just the gold passages earn (1 each)."""
        gains: dict[int, float] = {}

        def credit(pk: int, gain: float) -> None:
            if gain > gains.get(pk, 0.0):
                gains[pk] = gain

        for gold in golds:
            if gold.pk in self.ids:
                credit(gold.pk, rodcg_gain(0.0, self.alpha))
            if gold.position is None or gold.document_id not in self.by_document:
                continue
            # The candidates strictly within alpha of the gold (d < alpha).
            positions = self.positions[gold.document_id]
            low = np.searchsorted(positions, gold.position - self.alpha, side="right")
            high = np.searchsorted(positions, gold.position + self.alpha, side="left")
            for candidate in self.by_document[gold.document_id][low:high]:
                credit(candidate.pk, rodcg_gain(abs(candidate.position - gold.position), self.alpha))
        return gains


# --- many queries ------------------------------------------------------------------------------


@dataclass
class QueryOutcome:
    """What the metrics need to know about one query of a run."""

    relevances: dict[int, int]  # passage id -> relevance, every passage with relevance > 0
    relevant_ranks: dict[int, int]  # passage id -> exact rank, those in the candidate set
    candidates: int
    top_gains: list[float] = field(default_factory=list)  # f(d) of the top hits, in order
    candidate_gains: list[float] = field(default_factory=list)  # non-zero f(d) over the candidate set
    quote_length: int | None = None
    query: Query | None = None

    def value(self, key: str) -> float:
        """One metric by key (recall@20, p@5, ndcg@10, mrr@100, mrr, map, n_rodcg@1, mean_rank)."""
        ranks = list(self.relevant_ranks.values())
        stem, k = key.partition("@")[0], _cutoff(key)
        if stem == "recall":
            return recall_at(ranks, len(self.relevances), k)
        if stem == "p":
            return precision_at(ranks, k)
        if stem == "mrr":
            return reciprocal_rank_at(ranks, k)
        if stem == "map":
            return average_precision(ranks, len(self.relevances))
        if stem == "ndcg":
            ranked_relevance = {rank: self.relevances[pk] for pk, rank in self.relevant_ranks.items()}
            return ndcg_at(ranked_relevance, self.relevances.values(), k)
        if stem == "n_rodcg":
            return n_rodcg_at(self.top_gains, self.candidate_gains, k)
        if stem == "mean_rank":
            return float(best_rank(ranks, self.candidates))
        raise InputError(f"unknown metric {key!r}", field="metrics")

    def metrics(self, keys: Sequence[str] = METRICS) -> dict[str, float]:
        return {key: self.value(key) for key in keys}


def standard_error(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof 1) over sqrt(n); None below two queries."""
    if len(values) < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def summarize(outcomes: Sequence[QueryOutcome], keys: Sequence[str] = METRICS) -> dict:
    """Mean and standard error of every metric over `outcomes`."""
    per_query = [outcome.metrics(keys) for outcome in outcomes]
    columns = {name: [values[name] for values in per_query] for name in keys}
    return {
        "queries": len(outcomes),
        "metrics": {name: float(np.mean(column)) if column else None for name, column in columns.items()},
        "stderr": {name: standard_error(column) for name, column in columns.items()},
    }


# --- a stored run ------------------------------------------------------------------------------

LOCATED_FIELDS = ("pk", "document_id", "start", "length")


def _located(row: tuple) -> Located:
    pk, document_id, start, length = row
    return Located(pk, document_id, position(start, length))


def _outcomes(run: Run, gain_depth: int = CUTOFF) -> tuple[list[QueryOutcome], int]:
    """The evaluable queries' outcomes, and how many queries had no relevant passage at all.
    N-RODCG reads the top `gain_depth` stored hits, so it sees the top k only when the run's
    depth reaches k."""
    results = {result.query_id: result for result in run.query_results.all()}
    queries = [query for query in run.collection.queries.order_by("ordinal") if query.pk in results]
    relevances: dict[int, dict[int, int]] = {}
    for query_id, passage_id, relevance in Qrel.objects.filter(
        query__collection=run.collection, relevance__gt=0
    ).values_list("query_id", "passage_id", "relevance"):
        relevances.setdefault(query_id, {})[passage_id] = relevance
    golds = {
        row[0]: _located(row)
        for row in Passage.objects.filter(qrels__query__collection=run.collection, qrels__relevance__gt=0)
        .distinct()
        .values_list(*LOCATED_FIELDS)
    }
    top_hits: dict[int, list[int]] = {}
    for query_id, passage_id in (
        Hit.objects.filter(run=run, rank__lte=gain_depth)
        .order_by("query_id", "rank")
        .values_list("query_id", "passage_id")
    ):
        top_hits.setdefault(query_id, []).append(passage_id)

    outcomes = []
    for candidate_set in candidate_sets(run.collection, [q for q in queries if q.pk in relevances]):
        candidates = CandidatePositions([_located(row) for row in candidate_set.values(LOCATED_FIELDS)])
        for query in candidate_set.queries:
            result = results[query.pk]
            gains = candidates.gains([golds[pk] for pk in relevances[query.pk]])
            outcomes.append(
                QueryOutcome(
                    relevances=relevances[query.pk],
                    relevant_ranks={int(pk): rank for pk, rank in result.relevant_ranks.items()},
                    candidates=result.candidates,
                    top_gains=[gains.get(pk, 0.0) for pk in top_hits.get(query.pk, [])],
                    candidate_gains=list(gains.values()),
                    quote_length=query.quote_length,
                    query=query,
                )
            )
    without_relevant = sum(1 for query in queries if query.pk not in relevances)
    return outcomes, without_relevant


def query_field(query: Query, name: str) -> str:
    """A query's value of `name` for breakdowns: a Query column (split, quote_length, book) or
    a key of its metadata; "(none)" where it has none."""
    value = getattr(query, QUERY_COLUMNS[name]) if name in QUERY_COLUMNS else (query.metadata or {}).get(name)
    return "(none)" if value is None or value == "" else str(value)


QUERY_COLUMNS = {"split": "split", "quote_length": "quote_length", "book": "document_id"}


def run_outcomes(run: Run, keys: Sequence[str] = METRICS) -> tuple[list[QueryOutcome], int]:
    """A finished run's per-query outcomes for `keys`, and how many queries had no relevant
    passage (left out: they cannot be scored)."""
    require_done(run)
    depths = [_cutoff(key) for key in keys if key.startswith("n_rodcg@")]
    return _outcomes(run, max(depths, default=CUTOFF))


def evaluate_run(
    run: Run, metrics: Sequence[str] | None = None, *, per_query: bool = False, by: Sequence[str] = ()
) -> dict:
    """Metrics of a finished run (default METRICS; see parse_metrics), overall and by quote
    length; with `per_query` each query's values (query external id -> metric -> value); with
    `by` the same summary per value of each named query field (`query_field`). Queries without
    any relevant passage cannot be scored; they are left out and counted in
    `queries_without_relevant`."""
    keys = parse_metrics(metrics)
    outcomes, without_relevant = run_outcomes(run, keys)
    lengths = sorted({outcome.quote_length for outcome in outcomes if outcome.quote_length is not None})
    report = {
        "run_id": run.pk,
        **summarize(outcomes, keys),
        "queries_without_relevant": without_relevant,
        "by_quote_length": {
            str(length): summarize([outcome for outcome in outcomes if outcome.quote_length == length], keys)
            for length in lengths
        },
    }
    if per_query:
        report["per_query"] = {outcome.query.external_id: outcome.metrics(keys) for outcome in outcomes}
    if by:
        report["by"] = {}
        for name in by:
            groups: dict[str, list[QueryOutcome]] = {}
            for outcome in outcomes:
                groups.setdefault(query_field(outcome.query, name), []).append(outcome)
            report["by"][name] = {value: summarize(groups[value], keys) for value in sorted(groups)}
    return report


def run_metrics(run: Run) -> dict | None:
    """evaluate_run's report for a finished run (stored when it finished; computed for runs
    whose hits were written some other way); None while it is not done (no hits to score)."""
    if run.status != Run.Status.DONE:
        return None
    if run.metrics is not None:
        return run.metrics
    return evaluate_run(run)
