"""The report of a preference study: the scores per query (evaluation.preference_scores), how
much annotators agree, how consistent each one is, the judges beside them, and how runs compare
with the human ranking (evaluation.compatibility).

Outcomes: every answer decides each pair of passages it showed as one of four outcomes, written
from the pair's side (smaller passage id first): "first" better, "second" better, "tie", "both
bad". An annotator's outcome for a pair they judged more than once (a list and a pair, say) is
their latest.
- Pairwise agreement: over the pairs two annotators both decided, the share of annotator pairs
  giving the same outcome (overall and per pair of annotators), and Krippendorff's alpha
  (nominal) with pairs as units and the outcomes as values.
- Intransitivity: per annotator, among the triples of passages of one query whose three pairs
  they decided (with an order: not "both bad"), the share that no ranking with ties can explain
  (a > b > c > a, or a = b = c with a > c, ...).
- Judges (pairwise items): a judge's first sample per item against the humans' majority outcome
  (a strict majority of the item's answers; items without one are left out): agreement and
  Cohen's kappa, agreement with each annotator, the items where every annotator (two or more)
  agreed and the judge did not, and Kendall's tau between the Bradley-Terry scores of the judge's
  answers and of the humans' on each query.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
from django.utils import timezone

from annotation.models import Item, Study
from annotation.services.preference_designs import pair_of
from annotation.services.preference_scheduling import adaptive_progress, design_of, is_adaptive
from evaluation import label_agreement as stats
from evaluation.agreement import finite_or_none
from evaluation.compatibility import compare_with_preferences, human_order_tau
from evaluation.judge_report import self_consistency
from evaluation.preference_scores import (
    Answer,
    fit,
    preference_answers,
    preference_scores,
    require_preference_study,
    scored_passages,
)
from judges.selectors import study_judge_answers
from retrieval.models import Passage, Run

OUTCOMES = ("first", "second", "tie", "both_bad")
# Triples consistent with some ranking with ties: the levels of (a, b, c) in each weak order.
_WEAK_ORDERS = {
    levels for levels in itertools.product(range(3), repeat=3) if set(levels) == set(range(max(levels) + 1))
}


def pair_outcomes(answer: Answer) -> dict[tuple[int, int], str]:
    """The outcome the answer gives each pair of the passages it showed."""
    found = {}
    level = {}
    if answer.groups is not None:
        level = {answer.passages[p]: depth for depth, group in enumerate(answer.groups) for p in group}
    for a, b in itertools.combinations(answer.passages, 2):
        first, second = pair_of(a, b)
        if answer.groups is None:
            found[first, second] = "both_bad"
        elif level[first] == level[second]:
            found[first, second] = "tie"
        else:
            found[first, second] = "first" if level[first] < level[second] else "second"
    return found


def latest_outcomes(answers: Sequence[Answer]) -> dict[tuple[int, tuple[int, int]], dict[str, str]]:
    """(query, pair) -> annotator -> their latest outcome for the pair."""
    found: dict = defaultdict(dict)
    for answer in answers:
        for pair, outcome in pair_outcomes(answer).items():
            found[answer.query, pair][answer.annotator] = outcome
    return found


def pairwise_agreement(answers: Sequence[Answer]) -> dict:
    units = latest_outcomes(answers)
    agree = Counter()
    shared = Counter()
    for outcomes in units.values():
        for (first, a), (second, b) in itertools.combinations(sorted(outcomes.items()), 2):
            shared[first, second] += 1
            agree[first, second] += a == b
    triples = [
        (annotator, unit, OUTCOMES.index(outcome)) for unit, by in units.items() for annotator, outcome in by.items()
    ]
    doubly = [unit for unit, by in units.items() if len(by) > 1]
    alpha = stats.krippendorff_alpha(stats.reliability_matrix(triples).values, "nominal") if doubly else None
    total = sum(shared.values())
    return {
        "units": len(units),
        "units_with_several_annotators": len(doubly),
        "annotator_pairs_compared": total,
        "agreement": sum(agree.values()) / total if total else None,
        "krippendorff_alpha": finite_or_none(alpha) if alpha is not None else None,
        "by_annotators": {
            f"{first} | {second}": {"pairs": count, "agreement": agree[first, second] / count}
            for (first, second), count in sorted(shared.items())
        },
    }


def intransitive_triples(answers: Sequence[Answer]) -> dict:
    """annotator -> {triples, intransitive, share} (see the module docstring)."""
    by_annotator: dict[str, dict] = defaultdict(lambda: defaultdict(dict))
    for answer in answers:
        if answer.groups is None:
            continue
        for pair, outcome in pair_outcomes(answer).items():
            by_annotator[answer.annotator][answer.query][pair] = outcome
    found = {}
    for annotator, queries in sorted(by_annotator.items()):
        triples = broken = 0
        for decided in queries.values():
            neighbours = defaultdict(set)
            for a, b in decided:
                neighbours[a].add(b)
                neighbours[b].add(a)
            for a in neighbours:
                for b, c in itertools.combinations(sorted(x for x in neighbours[a] if x > a), 2):
                    if pair_of(b, c) not in decided:
                        continue
                    triples += 1
                    broken += not _consistent(decided, a, b, c)
        found[annotator] = {"triples": triples, "intransitive": broken, "share": broken / triples if triples else None}
    return found


def _consistent(decided: dict, a: int, b: int, c: int) -> bool:
    """Whether some ranking with ties gives the three pairs their decided outcomes."""

    def holds(levels, x, y):
        first, second = pair_of(x, y)
        outcome = decided[first, second]
        lx, ly = levels[first], levels[second]
        return {"tie": lx == ly, "first": lx < ly, "second": lx > ly}[outcome]

    for order in _WEAK_ORDERS:
        levels = dict(zip((a, b, c), order, strict=True))
        if holds(levels, a, b) and holds(levels, a, c) and holds(levels, b, c):
            return True
    return False


# --- judges ---------------------------------------------------------------------------------------


def _judge_outcome(parsed: dict | None) -> str | None:
    """A judge's parsed answer to a pair as a display-position outcome."""
    if parsed is None:
        return None
    if "position" in parsed:
        return "first" if parsed["position"] == 0 else "second"
    return parsed.get("label") if parsed.get("label") in ("tie", "both_bad") else None


def _human_outcome(answer: Answer) -> str:
    """A pair answer as a display-position outcome ("first" = the candidate shown first)."""
    if answer.groups is None:
        return "both_bad"
    if len(answer.groups) == 1:
        return "tie"
    return "first" if answer.groups[0] == [0] else "second"


def preference_judges(
    study: Study, answers: Sequence[Answer], item_answers: dict[int, list[tuple[str, Answer]]]
) -> dict:
    answers_by_judge = study_judge_answers(study)
    if not answers_by_judge:
        return {}
    majority = {}
    for item_id, given in item_answers.items():
        counts = Counter(_human_outcome(answer) for _, answer in given)
        outcome, votes = counts.most_common(1)[0]
        if votes * 2 > len(given):
            majority[item_id] = outcome
    shown = {item_id: given[0][1] for item_id, given in item_answers.items()}
    sections = {}
    for judge, per_item in answers_by_judge.items():
        said = {item_id: _judge_outcome(samples[0] if samples else None) for item_id, samples in per_item.items()}
        paired = [(majority[item], said[item]) for item in said if item in majority and said[item] is not None]
        versus = {}
        for annotator in sorted({name for given in item_answers.values() for name, _ in given}):
            theirs = [
                (_human_outcome(answer), said[item])
                for item, given in item_answers.items()
                for name, answer in given
                if name == annotator and said.get(item) is not None
            ]
            versus[annotator] = {
                "items": len(theirs),
                "agreement": sum(a == b for a, b in theirs) / len(theirs) if theirs else None,
            }
        parted = [
            {"item": item, "humans": outcomes.pop(), "judge": said[item]}
            for item, given in sorted(item_answers.items())
            if len(given) > 1
            and len(outcomes := {_human_outcome(answer) for _, answer in given}) == 1
            and said.get(item) is not None
            and said[item] not in outcomes
        ]
        sections[judge.name] = {
            "judge": judge.name,
            "version": judge.version,
            "backend": judge.backend,
            "items": len(item_answers),
            "answers": sum(len(samples) for samples in per_item.values()),
            "failed": sum(parsed is None for samples in per_item.values() for parsed in samples),
            "vs_majority": {
                "items": len(paired),
                "agreement": sum(a == b for a, b in paired) / len(paired) if paired else None,
                "cohen_kappa": finite_or_none(
                    stats.cohen_kappa([a for a, _ in paired], [b for _, b in paired], labels=list(OUTCOMES))
                )
                if paired
                else None,
            },
            "vs_annotators": versus,
            "humans_agree_judge_differs": parted,
            "ranking_tau": _ranking_tau(said, shown, answers),
            "self_consistency": self_consistency(
                {item: [_judge_outcome(parsed) for parsed in samples] for item, samples in per_item.items()},
                ("nominal",),
            ),
        }
    return sections


def _ranking_tau(said: dict[int, str | None], shown: dict[int, Answer], answers: Sequence[Answer]) -> float | None:
    """Mean over queries of Kendall's tau between Bradley-Terry scores fitted on the judge's
    answers and on the humans', over the passages both scored."""
    judge_answers = defaultdict(list)
    for item, outcome in said.items():
        if outcome is None or item not in shown:
            continue
        template = shown[item]
        groups = {"first": [[0], [1]], "second": [[1], [0]], "tie": [[0, 1]], "both_bad": None}[outcome]
        judge_answers[template.query].append(Answer(item, template.query, "judge", template.passages, groups))
    human_answers = defaultdict(list)
    for answer in answers:
        human_answers[answer.query].append(answer)
    taus = []
    for query, theirs in judge_answers.items():
        common = sorted(set(scored_passages(theirs)) & set(scored_passages(human_answers[query])))
        if len(common) < 2:
            continue
        judge_scores = fit("bradley-terry", common, [a for a in theirs if set(a.passages) <= set(common)], 0.01)
        human_scores = fit(
            "bradley-terry", common, [a for a in human_answers[query] if set(a.passages) <= set(common)], 0.01
        )
        tau = human_order_tau(dict(zip(map(str, common), human_scores)), dict(zip(map(str, common), judge_scores)))
        if tau is not None:
            taus.append(tau)
    return float(np.mean(taus)) if taus else None


# --- the report -------------------------------------------------------------------------------------


def preference_study_report(study: Study, model_runs: Sequence[Run] = ()) -> dict:
    """Everything the preference report shows, JSON-ready (see DESIGN.md's contract)."""
    require_preference_study(study)
    answers = preference_answers(study)
    scores = preference_scores(study, resamples=0)  # intervals: preference_scores, on request
    items = dict(Item.objects.filter(study=study, role=Item.Role.WORK).values_list("pk", "query_id"))
    item_answers = _answers_by_pair_item(answers)
    labels = dict(
        Passage.objects.filter(pk__in={p for a in answers for p in a.passages}).values_list("pk", "external_id")
    )
    intransitivity = intransitive_triples(answers)
    report = {
        "study": {
            "id": study.pk,
            "name": study.name,
            "kind": study.kind,
            "shape": (study.label_schema or {}).get("shape", "pairwise"),
            "judgments_per_item": study.judgments_per_item,
            "design": design_of(study),
        },
        "computed_at": timezone.now().isoformat(),
        "items": len(items),
        "judgments": len(answers),
        "answers": dict(Counter(_answer_kind(answer) for answer in answers)),
        "model": scores["model"],
        "alpha": scores["alpha"],
        "intervals": scores["intervals"],
        "queries": scores["queries"],
        "agreement": pairwise_agreement(answers),
        "intransitivity": intransitivity,
        "judges": preference_judges(study, answers, item_answers),
        "models": compare_with_preferences(study, model_runs)["runs"] if model_runs else {},
        "adaptive": adaptive_progress(study) if is_adaptive(study) else [],
    }
    if "systems" in scores:
        report["systems"] = scores["systems"]
    report["passages"] = len(labels)
    return report


def _answer_kind(answer: Answer) -> str:
    if answer.groups is None:
        return "both_bad"
    return "tie" if any(len(group) > 1 for group in answer.groups) else "strict"


def _answers_by_pair_item(answers: Sequence[Answer]) -> dict[int, list[tuple[str, Answer]]]:
    """Pairwise item id -> (annotator, answer) for each counted answer to it."""
    found: dict[int, list[tuple[str, Answer]]] = defaultdict(list)
    for answer in answers:
        if len(answer.passages) == 2:
            found[answer.item].append((answer.annotator, answer))
    return found
