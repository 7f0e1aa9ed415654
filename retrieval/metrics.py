"""Retrieval metrics of a run: by default recall@k, mean rank, MRR@10, nDCG@10 and N-RODCG@10,
each with a standard error, overall and per quote length (RELiC's Table A9); any measure of the
ir-measures vocabulary that trec_eval computes (retrieval/measures.py: `R@20 nDCG@10 AP Bpref
Judged@10 ...`, trec_eval's names as aliases), per query and broken down by any query field;
under any qrels source (retrieval/qrels_sources.py), with the share of each cutoff's passages
that is judged (Judged@k) and a warning where that share is low.

Conventions (trec_eval's and ir-measures', so every figure can be recomputed from exports):
- The queries scored are those with at least one judgment in the qrels. A query whose judgments
  are all non-relevant scores 0 in every mean (counted in `queries_without_relevant`); a query
  without any judgment is left out (`queries_without_judgments`); a judged query the run did not
  rank scores 0. Mean rank alone averages over the queries with a relevant passage (a query
  without one has no rank to give).
- Under the collection's own qrels, measures of where the relevant passages rank read the exact
  ranks a run stores for them over the whole candidate set (`RunQuery.relevant_ranks`), so
  recall@100 or mean rank are exact beyond the stored depth; `beyond_depth` names every figure
  that used such a rank, and `export_run --ranks` writes them beside the TREC file. Under any
  other qrels, and for measures that weigh unjudged passages, only the stored hits count, as in
  the exported run file.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings

from .errors import InputError
from .measures import Measure, Ranking, dcg, judged_share, parse_measures
from .models import Hit, Passage, Query, Run
from .qrels_sources import IMPORTED, Qrels, imported_qrels, load_qrels, rows_for, source_name
from .selectors import require_done
from .services.candidates import candidate_sets

# Stored reports (Run.metrics) of another version are computed again when read (3: with `page_coverage`).
REPORT_VERSION = 3
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


def measures_for(text: str | Sequence[str] | None, qrels: Qrels | None = None) -> list[Measure]:
    """The measures `text` names (default: METRICS). Mean rank needs the exact ranks runs store
    for the collection's own qrels: asked for under other qrels it is refused, and the default
    set leaves it out there."""
    measures = [measure for _, measure in parse_measures(text, METRICS)]
    if qrels is not None and not qrels.exact_ranks and any(m.measure == "mean_rank" for m in measures):
        if text:
            raise InputError(
                f"mean_rank needs the exact ranks runs store for the collection's own qrels, not {qrels.source}",
                field="metrics",
            )
        measures = [measure for measure in measures if measure.measure != "mean_rank"]
    return measures


def parse_metrics(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Metric keys from names such as "R@20 nDCG@10 MRR@100 MAP P@5 N-RODCG@1 Bpref ndcg_cut_10"
    (ir-measures, trec_eval or our own names, separated by spaces or commas); None or empty:
    the default METRICS. Keys are in the existing style: recall@20, ndcg@10, mrr@100, map, p@5,
    n_rodcg@1, bpref (retrieval.measures.Measure.key)."""
    return tuple(measure.key for measure in measures_for(text))


# --- one query ---------------------------------------------------------------------------------


def best_rank(relevant_ranks: Iterable[int], candidates: int) -> int:
    """Rank of the best-ranked relevant passage, for mean rank. A query whose relevant passages
    are all outside its candidate set counts as ranking them just past the end (candidates + 1),
    as if they had been appended last."""
    return min(relevant_ranks, default=candidates + 1)


def rodcg_gain(distance: float, alpha: float = RODCG_ALPHA) -> float:
    """Plot Retrieval's f(d): 1 / (d + 1) for a chunk within alpha positions of a gold chunk."""
    return 1.0 / (distance + 1.0) if distance < alpha else 0.0


def n_rodcg_at(retrieved_gains: Sequence[float], candidate_gains: Iterable[float], k: int) -> float:
    """N-RODCG@k (Plot Retrieval, eq. 2-4): the DCG of f(d) over the top k, divided by the DCG
    of the best possible ranking of the candidate set (its k largest gains first)."""
    ideal = dcg(enumerate(sorted(candidate_gains, reverse=True)[:k], 1))
    return dcg(enumerate(list(retrieved_gains)[:k], 1)) / ideal if ideal else 0.0


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
    """What the measures need to know about one query of a run under some qrels."""

    ranking: Ranking
    candidates: int
    top_gains: list[float] = field(default_factory=list)  # f(d) of the top hits, in order
    candidate_gains: list[float] = field(default_factory=list)  # non-zero f(d) over the candidate set
    quote_length: int | None = None
    query: Query | None = None
    _values: dict[str, float | None] = field(default_factory=dict, repr=False, compare=False)

    def value(self, measure: Measure) -> float | None:
        """One measure's value; None for mean rank on a query without a relevant passage. Computed
        once (by the measure's key, which names it in reports): a report reads each query's values
        in the overall summary, its quote length's, each `by` group's and per query."""
        key = measure.key
        if key not in self._values:
            self._values[key] = self._value(measure)
        return self._values[key]

    def _value(self, measure: Measure) -> float | None:
        if measure.measure == "mean_rank":
            if not self.ranking.relevant(1):
                return None
            return float(best_rank(self.ranking.relevant_ranks(1), self.candidates))
        if measure.measure == "N-RODCG":
            return n_rodcg_at(self.top_gains, self.candidate_gains, measure.cutoff)
        return self.ranking.value(measure)

    def metrics(self, measures: Sequence[Measure]) -> dict[str, float | None]:
        return {measure.key: self.value(measure) for measure in measures}

    def reaches_past_stored_hits(self, measure: Measure) -> bool:
        """Whether this query's value of `measure` used a rank below its stored hits."""
        if measure.measure == "mean_rank":
            rank = self.value(measure)
            return self.ranking.exact_ranks is not None and rank is not None and rank > len(self.ranking.returned)
        return self.ranking.reaches_past_returned(measure)


def standard_error(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof 1) over sqrt(n); None below two queries."""
    if len(values) < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def summarize(outcomes: Sequence[QueryOutcome], measures: Sequence[Measure]) -> dict:
    """Mean and standard error of every measure over `outcomes` (a query without a value for a
    measure, which only mean rank has, is left out of that measure's mean)."""
    columns: dict[str, list[float]] = {measure.key: [] for measure in measures}
    for outcome in outcomes:
        for key, value in outcome.metrics(measures).items():
            if value is not None:
                columns[key].append(value)
    return {
        "queries": len(outcomes),
        "metrics": {key: float(np.mean(column)) if column else None for key, column in columns.items()},
        "stderr": {key: standard_error(column) for key, column in columns.items()},
    }


# --- coverage ----------------------------------------------------------------------------------


def judged_cutoffs(measures: Iterable[Measure]) -> list[int | None]:
    """The depths coverage is reported at for these measures: each rank cutoff, then None (the
    whole stored ranking) when a measure without a cutoff reads the ranking."""
    cutoffs = {measure.cutoff for measure in measures if measure.measure != "mean_rank" and measure.level is None}
    return sorted(cutoff for cutoff in cutoffs if cutoff is not None) + ([None] if None in cutoffs else [])


def judged_key(cutoff: int | None) -> str:
    """Judged@k's key in reports: the cutoff, or "all" for the whole stored ranking."""
    return "all" if cutoff is None else str(cutoff)


def coverage_threshold(value=None) -> float:
    """The Judged@k below which figures get a warning: `value` (a per-call option) or the
    MARGINALIA_COVERAGE_THRESHOLD setting; a share between 0 and 1."""
    if value is None or value == "":
        return float(settings.MARGINALIA_COVERAGE_THRESHOLD)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        threshold = math.nan
    if not 0 <= threshold <= 1:
        raise InputError(f"must be a share between 0 and 1, got {value!r}", field="coverage_threshold")
    return threshold


def coverage_warning(judged: dict[str, float | None], qrels: Qrels, threshold: float) -> str | None:
    """One sentence when a mean Judged@k is below the threshold, else None (judged_warning)."""
    return judged_warning(judged, qrels.source, qrels.has_non_relevant, threshold)


def judged_warning(
    judged: dict[str, float | None], source: str, has_non_relevant: bool, threshold: float
) -> str | None:
    """coverage_warning from the qrels' source and whether they judge anything non-relevant, as a
    judged_summary keeps them. Qrels without any non-relevant judgment (only the golds, as
    RELiC's) call every other passage non-relevant by design: there the share of judged passages
    says nothing and gets no warning."""
    if not has_non_relevant:
        return None
    low = [(key, value) for key, value in judged.items() if value is not None and value < threshold]
    if not low:
        return None
    figures = ", ".join(f"Judged@{key} = {value:.2f}" for key, value in low)
    return (
        f"{figures} under {source}, below {threshold:.2f}: unjudged passages count as not relevant, "
        "so the metrics at those depths are lower bounds (was this run part of the judged pool?)"
    )


def judged_summary(outcomes: Sequence[QueryOutcome], cutoffs: Sequence[int | None], qrels: Qrels) -> dict:
    """Judged@k per cutoff in a form that answers for any threshold without the outcomes: the
    means (`judged`), their standard errors, and under `shares` each distinct share with its
    number of queries ([share, queries] pairs; a share is j/n with n <= k, so there are few),
    with the qrels' source and label and whether they judge anything non-relevant. A finished
    run stores one for its page (`page_coverage`, see run_page_coverage)."""
    columns = {judged_key(k): [judged_share(outcome.ranking, k) for outcome in outcomes] for k in cutoffs}
    return {
        "qrels": qrels.source,
        "qrels_label": qrels.label,
        "has_non_relevant": qrels.has_non_relevant,
        "queries": len(outcomes),
        "judged": {key: float(np.mean(values)) if values else None for key, values in columns.items()},
        "stderr": {key: standard_error(values) for key, values in columns.items()},
        "shares": {key: [list(pair) for pair in sorted(Counter(values).items())] for key, values in columns.items()},
    }


def coverage_at(summary: dict, threshold: float) -> dict:
    """A judged_summary at a threshold: the means (`judged`), and under `coverage` their
    standard errors, how many queries fall below the threshold, the threshold and the warning
    (or None)."""
    judged = summary["judged"]
    below = {
        key: sum(queries for share, queries in shares if share < threshold) for key, shares in summary["shares"].items()
    }
    low = judged_warning(judged, summary["qrels"], summary["has_non_relevant"], threshold)
    return {
        "judged": judged,
        "coverage": {
            "qrels": summary["qrels"],
            "threshold": threshold,
            "stderr": summary["stderr"],
            "queries_below": below,
            "warning": low,
        },
    }


def coverage(outcomes: Sequence[QueryOutcome], cutoffs: Sequence[int | None], qrels: Qrels, threshold: float) -> dict:
    """Judged@k per cutoff at `threshold` (coverage_at's keys)."""
    return coverage_at(judged_summary(outcomes, cutoffs, qrels), threshold)


def judged_shares(ranking: Ranking, cutoffs: Sequence[int | None]) -> dict[str, float]:
    """cutoff key -> one query's Judged@k."""
    return {judged_key(k): judged_share(ranking, k) for k in cutoffs}


def judged_per_query(outcomes: Sequence[QueryOutcome], cutoffs: Sequence[int | None]) -> dict[str, dict[str, float]]:
    """query external id -> cutoff key -> Judged@k."""
    return {outcome.query.external_id: judged_shares(outcome.ranking, cutoffs) for outcome in outcomes}


# The depths a run page reports coverage at: it reads only each query's top 10 stored hits.
COVERAGE_CUTOFFS = (5, 10)


# --- a stored run ------------------------------------------------------------------------------

LOCATED_FIELDS = ("pk", "document_id", "start", "length")
# The columns of a query that scoring never reads (a RELiC query's contexts run to kilobytes).
QUERY_TEXTS = ("text", "left_context", "right_context")


def _located(row: tuple) -> Located:
    pk, document_id, start, length = row
    return Located(pk, document_id, position(start, length))


def hits_depth(measures: Iterable[Measure], cutoffs: Iterable[int | None], exact: bool) -> int | None:
    """How deep into each query's stored hits the measures and the coverage cutoffs read: 0 when
    nothing reads them (every measure takes exact ranks), None for the whole ranking."""
    depths = list(cutoffs)
    for measure in measures:
        if measure.measure == "mean_rank" or (exact and measure.reads_exact_ranks):
            continue
        # judged_only ranks the judged passages among all the stored hits; Rprec reads R deep.
        reads_all = measure.judged_only or measure.measure in ("Rprec", "IPrec")
        depths.append(None if reads_all else measure.cutoff)
    if None in depths:
        return None
    return max(depths, default=0)


def stored_hits(run: Run, depth: int | None, query_ids: Sequence[int] | None = None) -> dict[int, list[int]]:
    """query id -> the passages of its top `depth` stored hits (None: all), best first; of every
    query, or of `query_ids` only."""
    hits: dict[int, list[int]] = {}
    if depth == 0:
        return hits
    rows = Hit.objects.filter(run=run)
    if query_ids is not None:
        rows = rows.filter(query_id__in=query_ids)
    if depth is not None:
        rows = rows.filter(rank__lte=depth)
    ordered = rows.order_by("query_id", "rank").values_list("query_id", "passage_id")
    current, passages = None, []
    for query_id, passage_id in ordered.iterator(chunk_size=20_000):
        if query_id != current:
            current, passages = query_id, hits.setdefault(query_id, [])
        passages.append(passage_id)
    return hits


def _rodcg_gains(run: Run, qrels: Qrels, queries: Sequence[Query]) -> dict[int, dict[int, float]]:
    """query id -> passage id -> f(d) around the query's relevant passages under `qrels`."""
    relevant = {query.pk: [pk for pk, grade in qrels.judgments[query.pk].items() if grade > 0] for query in queries}
    gold_ids = {pk for passages in relevant.values() for pk in passages}
    golds = {row[0]: _located(row) for row in rows_for(Passage.objects.all(), "pk", gold_ids, *LOCATED_FIELDS)}
    gains = {}
    for candidate_set in candidate_sets(run.collection, [query for query in queries if relevant[query.pk]]):
        candidates = CandidatePositions([_located(row) for row in candidate_set.values(LOCATED_FIELDS)])
        for query in candidate_set.queries:
            gains[query.pk] = candidates.gains([golds[pk] for pk in relevant[query.pk]])
    return gains


def run_outcomes(
    run: Run,
    qrels: Qrels,
    measures: Sequence[Measure],
    *,
    cutoffs: Sequence[int | None] = (),
    exact: bool = True,
) -> list[QueryOutcome]:
    """A finished run's outcome for every query judged in `qrels`, in collection order, reading
    the stored hits as deep as `measures` and the coverage `cutoffs` need. `exact`: give the
    rank-only measures the exact ranks stored for the collection's own qrels (False: only what
    the exported run file holds)."""
    require_done(run)
    exact = exact and qrels.exact_ranks
    results = {
        query_id: (candidates, ranks)
        for query_id, candidates, ranks in run.query_results.values_list("query_id", "candidates", "relevant_ranks")
    }
    # The outcomes name, group and place their queries; a query's texts stay in the database.
    listed = run.collection.queries.order_by("ordinal", "pk").defer(*QUERY_TEXTS)
    queries = [query for query in listed if query.pk in qrels.judgments]
    hits = stored_hits(run, hits_depth(measures, cutoffs, exact))
    rodcg_depth = max((measure.cutoff for measure in measures if measure.measure == "N-RODCG"), default=0)
    gains = _rodcg_gains(run, qrels, queries) if rodcg_depth else {}
    # A judged query the run has no result for retrieved nothing; its mean rank is one past its set.
    unranked = [query for query in queries if query.pk not in results]
    sizes = {
        query.pk: candidate_set.size()
        for candidate_set in (candidate_sets(run.collection, unranked) if unranked else [])
        for query in candidate_set.queries
    }
    outcomes = []
    for query in queries:
        candidates, ranks = results.get(query.pk, (sizes.get(query.pk, 0), {}))
        returned = hits.get(query.pk, [])
        query_gains = gains.get(query.pk, {})
        exact_ranks = {int(pk): rank for pk, rank in ranks.items()} if exact else None
        outcomes.append(
            QueryOutcome(
                ranking=Ranking(qrels.judgments[query.pk], returned, exact_ranks),
                candidates=candidates,
                top_gains=[query_gains.get(pk, 0.0) for pk in returned[:rodcg_depth]],
                candidate_gains=list(query_gains.values()),
                quote_length=query.quote_length,
                query=query,
            )
        )
    return outcomes


def query_field(query: Query, name: str) -> str:
    """A query's value of `name` for breakdowns: a Query column (split, quote_length, book) or
    a key of its metadata; "(none)" where it has none."""
    value = getattr(query, QUERY_COLUMNS[name]) if name in QUERY_COLUMNS else (query.metadata or {}).get(name)
    return "(none)" if value is None or value == "" else str(value)


QUERY_COLUMNS = {"split": "split", "quote_length": "quote_length", "book": "document_id"}


def evaluate_run(
    run: Run,
    metrics: str | Sequence[str] | None = None,
    *,
    per_query: bool = False,
    by: Sequence[str] = (),
    qrels: Qrels | str | None = None,
    threshold=None,
    page_coverage: bool = False,
) -> dict:
    """Metrics of a finished run (default METRICS; see parse_metrics) under `qrels` (a Qrels or
    a source name; default the collection's own), overall and by quote length, with Judged@k at
    the metrics' cutoffs and a coverage warning below `threshold` (default the setting); with
    `per_query` each query's values (query external id -> metric -> value) and Judged@k; with
    `by` the same summary per value of each named query field (`query_field`); with
    `page_coverage` the run page's judged_summary at COVERAGE_CUTOFFS, which a finished run
    stores with its report. The module docstring says which queries count."""
    qrels = qrels if isinstance(qrels, Qrels) else load_qrels(run.collection, qrels)
    measures = measures_for(metrics, qrels)
    cutoffs = judged_cutoffs(measures)
    threshold = coverage_threshold(threshold)
    read = [*cutoffs, *COVERAGE_CUTOFFS] if page_coverage else cutoffs
    outcomes = run_outcomes(run, qrels, measures, cutoffs=read)
    lengths = sorted({outcome.quote_length for outcome in outcomes if outcome.quote_length is not None})
    report = {
        "run_id": run.pk,
        "version": REPORT_VERSION,
        "qrels": qrels.source,
        **summarize(outcomes, measures),
        "queries_without_relevant": sum(1 for outcome in outcomes if not outcome.ranking.relevant(1)),
        "queries_without_judgments": run.collection.queries.count() - len(outcomes),
        "depth": run.parameters.get("depth"),
        "beyond_depth": [
            measure.key for measure in measures if any(o.reaches_past_stored_hits(measure) for o in outcomes)
        ],
        **coverage(outcomes, cutoffs, qrels, threshold),
        "by_quote_length": {
            str(length): summarize([outcome for outcome in outcomes if outcome.quote_length == length], measures)
            for length in lengths
        },
    }
    if page_coverage:
        report["page_coverage"] = judged_summary(outcomes, COVERAGE_CUTOFFS, qrels)
    if per_query:
        report["per_query"] = {outcome.query.external_id: outcome.metrics(measures) for outcome in outcomes}
        report["judged_per_query"] = judged_per_query(outcomes, cutoffs)
    if by:
        report["by"] = {}
        for name in by:
            groups: dict[str, list[QueryOutcome]] = {}
            for outcome in outcomes:
                groups.setdefault(query_field(outcome.query, name), []).append(outcome)
            report["by"][name] = {value: summarize(groups[value], measures) for value in sorted(groups)}
    return report


def run_coverage(run: Run, qrels: Qrels | str | None = None, threshold=None, cutoffs=COVERAGE_CUTOFFS) -> dict:
    """Judged@k of a finished run under `qrels` (default the collection's own) at `cutoffs`: keys
    `qrels_label`, `queries`, `judged`, `coverage` (as in evaluate_run) and `judged_per_query`."""
    qrels = qrels if isinstance(qrels, Qrels) else load_qrels(run.collection, qrels)
    threshold = coverage_threshold(threshold)
    outcomes = run_outcomes(run, qrels, (), cutoffs=cutoffs)
    return {
        "qrels_label": qrels.label,
        "queries": len(outcomes),
        **coverage(outcomes, cutoffs, qrels, threshold),
        "judged_per_query": judged_per_query(outcomes, cutoffs),
    }


def run_page_coverage(run: Run, queries: Sequence[Query], qrels: str | None = None, threshold=None) -> dict:
    """run_coverage's figures with Judged@k per query for `queries` (one page of the run page)
    only. Under the imported qrels, which cannot change while the collection has runs, they come
    from the summary stored with the finished run's report (`page_coverage`) and the top hits of
    `queries`: a page of a 100K-query run reads 100 queries' hits, not every hit. Under any other
    source (labels that grow as people judge) they are computed in full, as run_coverage does."""
    summary = (run_metrics(run) or {}).get("page_coverage")
    if summary is None or source_name(qrels) != IMPORTED:
        return run_coverage(run, qrels, threshold)
    threshold = coverage_threshold(threshold)
    judgments = imported_qrels(run.collection, [query.pk for query in queries]).judgments
    hits = stored_hits(run, max(COVERAGE_CUTOFFS), [query.pk for query in queries if query.pk in judgments])
    return {
        "qrels_label": summary["qrels_label"],
        "queries": summary["queries"],
        **coverage_at(summary, threshold),
        "judged_per_query": {
            query.external_id: judged_shares(Ranking(judgments[query.pk], hits.get(query.pk, [])), COVERAGE_CUTOFFS)
            for query in queries
            if query.pk in judgments
        },
    }


def run_metrics(run: Run) -> dict | None:
    """evaluate_run's report for a finished run: the one stored when it finished, else (hits
    written some other way, or a report of an older version) computed now and stored; None
    while it is not done (no hits to score)."""
    if run.status != Run.Status.DONE:
        return None
    if run.metrics is None or run.metrics.get("version") != REPORT_VERSION:
        run.metrics = evaluate_run(run, page_coverage=True)
        run.save(update_fields=["metrics"])
    return run.metrics
