"""Judges beside the humans in a study report (the `judges` key: judge name -> figures).

Proxy studies: the judge's accuracy on the same items, McNemar's exact test (statsmodels) against
the human majority on the complete items, and the items where unanimous humans chose an option
the judge did not. Label studies: Cohen's kappa (unweighted, and linear / quadratic on scales)
and Krippendorff's alpha between the judge and the human majority and with each annotator,
alpha over the humans with and without the judge, the confusion matrix against the majority,
the units where the humans agree and the judge does not, and Spearman / Kendall of the judge's
scores against the mean human grade. With several samples per item, the judge's
self-consistency. A judge's answer to an item is its first sample's (sample 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotation.majority import majority_votes
from annotation.models import Study
from evaluation import label_agreement as stats
from evaluation.agreement import finite_or_none
from evaluation.selectors import ProxyItems, item_labels
from judges.models import Judge
from judges.selectors import study_judge_answers

JUDGE_RATER = "judge"
MAJORITY_RATER = "human majority"


def _first(answers: list[dict | None], key: str):
    parsed = answers[0] if answers else None
    return None if parsed is None else parsed.get(key)


def _head(judge: Judge, answers: dict[int, list[dict | None]], items: int) -> dict:
    flat = [parsed for per_item in answers.values() for parsed in per_item]
    return {
        "judge": judge.name,
        "version": judge.version,
        "backend": judge.backend,
        "items": items,
        "samples": max((len(per_item) for per_item in answers.values()), default=0),
        "answers": len(flat),
        "failed": sum(parsed is None for parsed in flat),
    }


def self_consistency(values_by_item: dict[int, list], levels: Sequence[str]) -> dict | None:
    """How often the judge's samples agree with each other: the share of items whose read
    samples are all equal, and Krippendorff's alpha with samples as raters. None for one sample."""
    rows = {item: [v for v in values if v is not None] for item, values in values_by_item.items()}
    rows = {item: values for item, values in rows.items() if len(values) >= 2}
    if not rows:
        return None
    triples = [
        (sample, item, value)
        for item, values in values_by_item.items()
        if item in rows
        for sample, value in enumerate(values)
        if value is not None
    ]
    return {
        "items": len(rows),
        "samples": max(len(values) for values in values_by_item.values()),
        "all_agree": sum(len(set(values)) == 1 for values in rows.values()) / len(rows),
        "krippendorff_alpha": _alphas(triples, levels),
    }


# --- proxy ----------------------------------------------------------------------------------------


def proxy_judges(
    study: Study, items: ProxyItems, complete: np.ndarray, counts: np.ndarray, humans_correct: np.ndarray
) -> dict:
    """judge name -> accuracy, McNemar against the human majority, and the items where unanimous
    humans and the judge part ways. `complete` are the ids of the complete items, `counts` their
    votes per display position, `humans_correct` whether their majority chose the gold."""
    answers_by_judge = study_judge_answers(study)
    if not answers_by_judge:
        return {}
    # Loaded here: statsmodels and the pandas it imports take half a second to load, which every
    # report process paid, though most studies have no judge.
    from statsmodels.stats.contingency_tables import mcnemar

    sections = {}
    gold_of = dict(zip(items.ids.tolist(), items.gold.tolist(), strict=True))
    for judge, answers in answers_by_judge.items():
        chosen = {item_id: _first(answers.get(item_id, []), "position") for item_id in gold_of}
        correct = [chosen[item_id] == gold for item_id, gold in gold_of.items() if chosen[item_id] is not None]
        paired = [(row, item_id) for row, item_id in enumerate(complete.tolist()) if chosen[item_id] is not None]
        judge_right = np.array([chosen[item_id] == gold_of[item_id] for _, item_id in paired], dtype=bool)
        humans_right = np.array([bool(humans_correct[row]) for row, _ in paired], dtype=bool)
        table = [
            [int(np.sum(judge_right & humans_right)), int(np.sum(judge_right & ~humans_right))],
            [int(np.sum(~judge_right & humans_right)), int(np.sum(~judge_right & ~humans_right))],
        ]
        test = mcnemar(table, exact=True) if paired else None
        parted = []
        for row, item_id in paired:
            votes = counts[row]
            unanimous = int(np.argmax(votes))
            if votes[unanimous] == votes.sum() and chosen[item_id] != unanimous:
                parted.append((item_id, unanimous, votes))
        labels = item_labels(item_id for item_id, _, _ in parted)
        disagreements = [
            {
                "item": item_id,
                "query": labels[item_id].query,
                "gold": gold_of[item_id],
                "humans_chose": unanimous,
                "judge_chose": chosen[item_id],
                "votes": [int(v) for v in votes],
            }
            for item_id, unanimous, votes in parted
        ]
        sections[judge.name] = {
            **_head(judge, answers, len(gold_of)),
            "answered_items": len(correct),
            "coverage": len(correct) / len(gold_of) if gold_of else None,
            "accuracy": sum(correct) / len(correct) if correct else None,
            "mcnemar": {
                "paired_items": len(paired),
                "table": table,
                "judge_only_correct": table[0][1],
                "humans_only_correct": table[1][0],
                "p_value": finite_or_none(float(test.pvalue)) if test is not None else None,
                "method": "exact (binomial), statsmodels",
            },
            "humans_agree_judge_differs": disagreements,
            "self_consistency": self_consistency(
                {item_id: [p and p.get("position") for p in per_item] for item_id, per_item in answers.items()},
                ("nominal",),
            ),
        }
    return sections


# --- labels ---------------------------------------------------------------------------------------


def _pair_agreement(first: list, second: list, values: Sequence[int], levels: Sequence[str]) -> dict:
    """Cohen's kappa (with weights on a scale) and Krippendorff's alpha of two raters over the
    units both rated."""
    weights = (
        {"unweighted": None} if len(values) <= 2 else {"unweighted": None, "linear": "linear", "quadratic": "quadratic"}
    )
    if not first:
        return {"units": 0, "cohen_kappa": dict.fromkeys(weights), "krippendorff_alpha": dict.fromkeys(levels)}
    matrix = np.array([first, second], dtype=float)
    return {
        "units": len(first),
        "cohen_kappa": {
            name: finite_or_none(stats.cohen_kappa(first, second, weight, labels=list(values)))
            for name, weight in weights.items()
        },
        "krippendorff_alpha": {level: finite_or_none(stats.krippendorff_alpha(matrix, level)) for level in levels},
    }


def _alphas(triples: list, levels: Sequence[str]) -> dict:
    if not triples:
        return dict.fromkeys(levels)
    matrix = stats.reliability_matrix(triples).values
    return {level: finite_or_none(stats.krippendorff_alpha(matrix, level)) for level in levels}


def label_judges(data, levels: Sequence[str]) -> dict:
    """judge name -> agreement with the human majority and each annotator, alpha with and
    without the judge, confusion matrix, disagreements, correlation and self-consistency.
    `data` is the report's LabelData, `levels` the alpha levels its scale allows."""
    values = list(data.values)
    sections = {}
    units_by_item = {unit.item.id: unit for unit in data.units}
    human_triples = data.triples()
    for judge, answers in study_judge_answers(data.study).items():
        label_of = {}
        score_of = {}
        for item_id, per_item in answers.items():
            unit = units_by_item.get(item_id)
            if unit is None:
                continue
            label = _first(per_item, "label")
            score = label if label is not None else _first(per_item, "score")
            if label is not None:
                label_of[unit.key] = label
            if score is not None:
                score_of[unit.key] = score
        majority = {}
        for unit in data.units:
            labels = data.labels(unit)
            if labels:
                vote = majority_votes([labels])[0]
                if not vote.is_tie:
                    majority[unit.key] = vote.label
        shared = [key for key in majority if key in label_of]
        confusion = [
            [sum(1 for key in shared if majority[key] == h and label_of[key] == j) for j in values] for h in values
        ]
        annotators = sorted({annotator for ratings in data.ratings.values() for annotator in ratings})
        per_annotator = {}
        for annotator in annotators:
            keys = [key for key, ratings in data.ratings.items() if annotator in ratings and key in label_of]
            per_annotator[annotator] = _pair_agreement(
                [label_of[key] for key in keys], [data.ratings[key][annotator] for key in keys], values, levels
            )
        judge_triples = [(f"{JUDGE_RATER}:{judge.name}", key, label) for key, label in label_of.items()]
        disagreements = []
        for unit in data.units:
            labels = data.labels(unit)
            if len(labels) >= 2 and len(set(labels)) == 1 and unit.key in label_of and label_of[unit.key] != labels[0]:
                disagreements.append(
                    {
                        "item": unit.item.id,
                        "query": unit.item.query,
                        "passage": unit.candidate.passage,
                        "humans": labels[0],
                        "judge": label_of[unit.key],
                    }
                )
        rated = [unit for unit in data.units if data.labels(unit) and unit.key in score_of]
        correlation = None
        if len(rated) >= 3:
            result = stats.correlate_with_mean_grades([score_of[u.key] for u in rated], [data.labels(u) for u in rated])
            correlation = {
                "units": len(rated),
                "spearman": finite_or_none(result.spearman.statistic),
                "spearman_p": finite_or_none(result.spearman.p_value),
                "kendall_tau_b": finite_or_none(result.kendall_tau_b.statistic),
                "kendall_p": finite_or_none(result.kendall_tau_b.p_value),
            }
        sections[judge.name] = {
            **_head(judge, answers, len(data.units)),
            "labelled_units": len(label_of),
            "vs_majority": {
                **_pair_agreement([label_of[k] for k in shared], [majority[k] for k in shared], values, levels),
                "tied_units_left_out": sum(1 for unit in data.units if data.labels(unit)) - len(majority),
            },
            "vs_annotators": per_annotator,
            "krippendorff_alpha_humans": _alphas(human_triples, levels),
            "krippendorff_alpha_with_judge": _alphas(human_triples + judge_triples, levels),
            "confusion": {"rows": "human majority", "columns": "judge", "values": values, "matrix": confusion},
            "humans_agree_judge_differs": disagreements,
            "correlation_with_mean_grade": correlation,
            "self_consistency": self_consistency(
                {
                    units_by_item[item_id].key: [p and p.get("label", p.get("score")) for p in per_item]
                    for item_id, per_item in answers.items()
                    if item_id in units_by_item
                },
                levels,
            ),
        }
    return sections
