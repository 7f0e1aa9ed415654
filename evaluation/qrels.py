"""Qrels from a relevance study: the aggregated human labels as TREC lines (`qid 0 docid
relevance`), or as a BEIR folder that `import_beir` reads back, so a study's judgments become the
ground truth that `retrieve` + `evaluate_run` score runs against.

Aggregation (one rule for ties everywhere: the lower label, i.e. "not relevant" unless the
annotators say otherwise):
- majority: the most frequent label; a tie between labels goes to the lowest of them.
- mean / median: the scale value nearest to the labels' mean / median; a value exactly halfway
  between two scale values goes to the lower one (so [0, 1] -> 0, [1, 2] -> 1, [0, 2, 2] -> 1).
- dawid-skene / mace / glad: the label of a model of annotator competence
  (evaluation.label_models) fitted on every (query, passage) pair of the study at once, seeded
  with the study's seed; an annotator who labelled one pair in two items counts once (the
  first item's label). The judge of `both` is one more annotator, named "judge:NAME".
Staff's adjudication replaces the aggregate of the item. Items nobody judged are left out (and
counted); only formal work items are exported, never hidden gold or qualification items. Two
items on the same (query, passage) pool their labels.

Provenance: every qrel knows where its label comes from (annotation.provenance's label sources:
adjudicated, unanimous, single, or aggregated with the export's method); `summary()` counts them
(`label_sources`) and the pairs sent back for rework still waiting for a new round
(`sent_back`, among the unjudged), and `provenance_rows()` gives them per qrel (`export_qrels
--provenance`, `?provenance=1`).

Sources: `humans` (the annotators' labels), `judge` (a judge's labels, one per sample; no
adjudication, they are the judge's own) or `both` (the judge's first sample counted as one more
rater beside the humans).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from annotation.majority import majority_votes
from annotation.models import Study
from annotation.provenance import LABEL_SOURCES, SENT_BACK, label_method, label_source, rework_counts
from evaluation import label_agreement as stats
from evaluation.aggregates import AGGREGATES, COMPETENCE_MODELS, SOURCES
from evaluation.bundles import beir_writers, write_folder
from evaluation.label_models import aggregate as fit_model
from evaluation.label_report import label_data
from judges.models import Judge
from judges.selectors import judge_labels
from retrieval.errors import InputError
from retrieval.files import write_atomically


@dataclass(frozen=True)
class Qrel:
    query: str
    passage: str
    relevance: int
    labels: tuple[int, ...]
    tie: bool  # resolved to the lower label
    adjudicated: bool
    source: str  # annotation.provenance's label source
    method: str | None  # the aggregate, for an aggregated label


@dataclass(frozen=True)
class QrelsExport:
    study: Study
    aggregate: str
    qrels: list[Qrel]
    unjudged: int  # (query, passage) pairs nobody judged yet, left out
    sent_back: int = 0  # of those, pairs of items sent back for rework, waiting for a new round

    def lines(self, provenance: bool = False) -> list[str]:
        """TREC qrels lines, `qid 0 docid relevance`, sorted by query then passage id; with
        `provenance`, the same qrels as JSON lines (`provenance_rows`)."""
        if provenance:
            return [json.dumps(row, sort_keys=True) for row in self.provenance_rows()]
        return [f"{qrel.query} 0 {qrel.passage} {qrel.relevance}" for qrel in self.qrels]

    def summary(self) -> dict:
        return {
            "study": self.study.pk,
            "aggregate": self.aggregate,
            "qrels": len(self.qrels),
            "queries": len({qrel.query for qrel in self.qrels}),
            "relevant": sum(qrel.relevance > 0 for qrel in self.qrels),
            "ties": sum(qrel.tie for qrel in self.qrels),
            "adjudicated": sum(qrel.adjudicated for qrel in self.qrels),
            "unjudged": self.unjudged,
            "label_sources": {
                source: sum(qrel.source == source for qrel in self.qrels)
                for source in LABEL_SOURCES
                if source not in (SENT_BACK, "unjudged")
            },
            "sent_back": self.sent_back,
        }

    def provenance_rows(self) -> list[dict]:
        """One row per qrel, as the lines are ordered: `query-id`, `corpus-id`, `score`,
        `label_source`, `label_method` (the aggregate, for aggregated labels), `labels` (the
        labels it was made from), `tie`."""
        return [
            {
                "query-id": qrel.query,
                "corpus-id": qrel.passage,
                "score": qrel.relevance,
                "label_source": qrel.source,
                "label_method": qrel.method,
                "labels": list(qrel.labels),
                "tie": qrel.tie,
            }
            for qrel in self.qrels
        ]


def nearest_scale_value(value: float, scale: Sequence[int]) -> tuple[int, bool]:
    """The scale value nearest to `value`, the lower one when two are equally near (and True)."""
    distances = sorted((abs(candidate - value), candidate) for candidate in scale)
    return distances[0][1], len(distances) > 1 and distances[1][0] == distances[0][0]


def aggregate_labels(labels: Sequence[int], aggregate: str, scale: Sequence[int]) -> tuple[int, bool]:
    """One label for an item from its annotators' labels, and whether a tie had to be resolved."""
    if aggregate == "majority":
        vote = majority_votes([labels], tie_rule="lowest")[0]
        return vote.label, vote.is_tie
    centre = stats.mean_grades([labels])[0] if aggregate == "mean" else stats.median_grades([labels])[0]
    return nearest_scale_value(float(centre), scale)


def relevance_qrels(
    study: Study, aggregate: str = "majority", source: str = "humans", judge: Judge | None = None
) -> QrelsExport:
    """The study's aggregated relevance labels, one qrel per judged (query, passage), from the
    humans, a judge, or both."""
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}: use one of {', '.join(SOURCES)}", field="source")
    if source != "humans" and judge is None:
        raise InputError(f"qrels from {source} need a judge", field="judge")
    if aggregate not in AGGREGATES:
        raise InputError(f"unknown aggregate {aggregate!r}: use one of {', '.join(AGGREGATES)}", field="aggregate")
    if aggregate in COMPETENCE_MODELS and source == "judge":
        raise InputError(f"{aggregate} weighs annotators; a judge's samples are one rater's", field="aggregate")
    if study.kind != Study.Kind.RELEVANCE:
        raise InputError(f"study {study.pk} is a {study.kind} study; qrels come from relevance studies", field="study")
    data = label_data(study)
    if data.multi_select:
        raise InputError(f"study {study.pk} asks for selections, not relevance labels", field="study")
    labels: dict[tuple[str, str], list[int]] = {}
    raters: dict[tuple[str, str], dict[str, int]] = {}  # pair -> annotator -> label, for the models
    adjudicated: dict[tuple[str, str], int] = {}
    judged = judge_labels(study, judge) if judge is not None else {}
    for unit in data.units:
        pair = (unit.item.query, unit.candidate.passage)
        answers = judged.get(unit.item.id, [])
        if source == "judge":
            labels.setdefault(pair, []).extend(answers)
            continue
        labels.setdefault(pair, []).extend(data.labels(unit) + (answers[:1] if source == "both" else []))
        for annotator, label in data.ratings[unit.key].items():
            raters.setdefault(pair, {}).setdefault(annotator, label)
        if source == "both" and answers:
            raters.setdefault(pair, {}).setdefault(f"judge:{judge.name}", answers[0])
        if unit.key in data.adjudicated:
            adjudicated[pair] = data.adjudicated[unit.key]
    modelled = _model_labels(raters, aggregate, data.values, study.seed) if aggregate in COMPETENCE_MODELS else {}
    reworked = rework_counts(study) if source != "judge" else {}
    sent_back = {(unit.item.query, unit.candidate.passage) for unit in data.units if unit.item.id in reworked}
    qrels, unjudged, waiting = [], 0, 0
    for pair in sorted(labels):
        given = tuple(sorted(labels[pair]))
        if pair in adjudicated:
            relevance, tie = adjudicated[pair], False
        elif labels[pair] and aggregate in COMPETENCE_MODELS:
            relevance, tie = modelled[pair], False
        elif labels[pair]:
            relevance, tie = aggregate_labels(labels[pair], aggregate, data.values)
        else:
            unjudged += 1
            waiting += pair in sent_back
            continue
        origin = label_source(given, relevance, adjudicated=pair in adjudicated)
        qrels.append(Qrel(*pair, relevance, given, tie, pair in adjudicated, origin, label_method(origin, aggregate)))
    return QrelsExport(study, aggregate, qrels, unjudged, waiting)


def _model_labels(
    raters: dict[tuple[str, str], dict[str, int]], method: str, values: Sequence[int], seed: int
) -> dict[tuple[str, str], int]:
    """(query, passage) -> the competence model's label, the model fitted on every pair at once
    (tasks are the pairs' indexes in sorted order)."""
    pairs = sorted(pair for pair, by_annotator in raters.items() if by_annotator)
    triples = [(name, task, label) for task, pair in enumerate(pairs) for name, label in raters[pair].items()]
    fitted = fit_model(triples, method, seed=seed, values=values)
    return {pair: fitted.labels[task] for task, pair in enumerate(pairs)}


def write_qrels_file(export: QrelsExport, path: str | Path, provenance: bool = False) -> Path:
    path = Path(path)
    write_atomically(path, lambda file: file.writelines(line + "\n" for line in export.lines(provenance)))
    return path


def write_beir_folder(export: QrelsExport, directory: str | Path) -> dict:
    """A BEIR folder of the study's collection with the exported qrels: corpus.jsonl (every
    passage), queries.jsonl (every query, as retrieval reads it with the study's context
    sizes), qrels.tsv and, when the collection has them, each query's pool (pools.jsonl).
    RELiC books become a flat corpus: BEIR has no documents, so every query is ranked against
    the whole corpus (or its pool). The folder must be new or empty; it appears complete or not
    at all (evaluation.bundles writes it)."""
    study = export.study
    triples = [(qrel.query, qrel.passage, qrel.relevance) for qrel in export.qrels]
    writers = beir_writers(study.collection, triples, (study.context_left, study.context_right))
    return {"beir": str(write_folder(directory, writers, field="beir")), "files": sorted(writers)}
