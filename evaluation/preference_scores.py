"""A preference study's answers aggregated per query: Bradley-Terry (pairs, and lists broken into
their pairs), Plackett-Luce (lists) or Elo (arena-style) scores with bootstrap intervals, the
ranking they give, preference qrels, and that ranking stored as a run ("the human ranking").

Scores are on the log scale (a difference d between two passages is a win probability of
1 / (1 + e^-d)) and sum to 0 over the query's scored passages: the passages that took part in at
least one answer with an order ("both bad" alone says nothing about order). The fits are choix's
(annotation.services.preference_fit: ties half a win to each side, regularisation `alpha`).
Elo replays the answers in the order they were given (K = 4, 400-point scale, every passage
starting at 1000, as LMSYS's arena does) and reports the ratings converted to the same log scale
(a rating difference r is r x ln(10) / 400) beside the raw ratings.

Intervals: percentile bootstrap over each query's answers (the answers resampled with
replacement, the model refitted; Elo replays each resample in a shuffled order), seeded.

Preference qrels: per query, the scored passages graded by place, best = number scored, down to
1, tied scores sharing a grade; a passage that more than half of the answers showing it called
"both bad" gets 0 (it is in no ideal ranking). Compatibility (evaluation.compatibility) reads
them as Clarke et al.'s ideal ranking.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from annotation.models import ItemCandidate, Study
from annotation.preference_schema import answer_groups
from annotation.selectors import counted_judgments
from annotation.services.preference_designs import DEFAULT_ALPHA, pair_tallies
from annotation.services.preference_fit import bradley_terry, plackett_luce, win_matrix
from retrieval.errors import InputError
from retrieval.models import Collection, Hit, Passage, Query, Retriever, Run
from retrieval.services.external_runs import save_ranked_run

MODELS = ("bradley-terry", "plackett-luce", "elo")
ELO_K, ELO_SCALE, ELO_START = 4.0, 400.0, 1000.0
DEFAULT_RESAMPLES = 200
CONFIDENCE_LEVEL = 0.95
HUMAN_RETRIEVER = "human preferences"


@dataclass(frozen=True)
class Answer:
    """One counted preference answer: who gave it, the passages in the order shown and the tie
    groups of display positions (best first), or None for "both bad"."""

    item: int
    query: int
    annotator: str
    passages: tuple[int, ...]
    groups: list[list[int]] | None


def require_preference_study(study: Study) -> None:
    if study.kind != Study.Kind.PREFERENCE:
        raise InputError(f"study {study.pk} is a {study.kind} study, not a preference study", field="study")


def preference_answers(study: Study) -> list[Answer]:
    """The study's counted answers (annotation.selectors.counted_judgments), in the order they
    were given."""
    shown: dict[int, list[int]] = defaultdict(list)
    for item_id, passage_id in (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "passage_id")
    ):
        shown[item_id].append(passage_id)
    rows = (
        counted_judgments(study)
        .order_by("submitted_at", "pk")
        .values_list("item_id", "item__query_id", "annotator__username", "label")
    )
    return [
        Answer(item_id, query_id, annotator, tuple(shown[item_id]), answer_groups(label))
        for item_id, query_id, annotator, label in rows.iterator(10_000)
    ]


# --- fitting ----------------------------------------------------------------------------------------


def scored_passages(answers: Sequence[Answer]) -> list[int]:
    """The passages some answer put in an order, in order of first appearance."""
    return list(dict.fromkeys(p for answer in answers if answer.groups is not None for p in answer.passages))


def fit(model: str, passages: Sequence[int], answers: Sequence[Answer], alpha: float) -> np.ndarray:
    """Log-scale scores of `passages` (summing to 0) from `answers` under `model`."""
    index = {passage: position for position, passage in enumerate(passages)}
    ordered = [answer for answer in answers if answer.groups is not None]
    if model == "elo":
        ratings = elo_ratings(len(passages), ordered, index)
        logits = (ratings - ELO_START) * math.log(10) / ELO_SCALE
        return logits - logits.mean()
    if model == "plackett-luce":
        lists = [[[index[answer.passages[p]] for p in group] for group in answer.groups] for answer in ordered]
        return plackett_luce(len(passages), lists, alpha)
    tallies = pair_tallies((answer.passages, answer.groups) for answer in ordered)
    wins = win_matrix(
        len(passages), ((index[a], index[b], first, second) for (a, b), (first, second, _) in tallies.items())
    )
    return bradley_terry(wins, alpha)


def elo_ratings(size: int, answers: Sequence[Answer], index: dict[int, int]) -> np.ndarray:
    """Elo ratings after replaying the answers in the given order (each pair of a list answer as
    one game; a tie scores 1/2)."""
    ratings = np.full(size, ELO_START)
    for answer in answers:
        level = {answer.passages[p]: depth for depth, group in enumerate(answer.groups) for p in group}
        members = list(answer.passages)
        for first_at, first in enumerate(members):
            for second in members[first_at + 1 :]:
                a, b = index[first], index[second]
                expected = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / ELO_SCALE))
                outcome = 0.5 if level[first] == level[second] else float(level[first] < level[second])
                ratings[a] += ELO_K * (outcome - expected)
                ratings[b] -= ELO_K * (outcome - expected)
    return ratings


def bootstrap_intervals(
    model: str,
    passages: Sequence[int],
    answers: Sequence[Answer],
    alpha: float,
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(passages x 2) percentile intervals of the scores over `resamples` resamples of the answers."""
    draws = np.empty((resamples, len(passages)))
    for draw in range(resamples):
        chosen = rng.integers(0, len(answers), len(answers))
        if model == "elo":
            rng.shuffle(chosen)
        draws[draw] = fit(model, passages, [answers[i] for i in chosen], alpha)
    tail = (1 - CONFIDENCE_LEVEL) / 2 * 100
    return np.percentile(draws, [tail, 100 - tail], axis=0).T


# --- the scores of a study ----------------------------------------------------------------------------


def preference_scores(
    study: Study,
    *,
    model: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict:
    """Per query: `scores` (passage external id -> log-scale score, summing to 0), `ranking`
    (best first; equal scores by wins, then external id), `intervals`, `wins`, `comparisons`
    (answers each passage took part in) and `both_bad` (share of its answers calling it so);
    plus `systems` for a study of generated answers. `model` defaults to Plackett-Luce for
    listwise studies and Bradley-Terry otherwise."""
    require_preference_study(study)
    listwise = (study.label_schema or {}).get("shape") == "listwise"
    model = model or ("plackett-luce" if listwise else "bradley-terry")
    if model not in MODELS:
        raise InputError(f"must be one of {', '.join(MODELS)}, got {model!r}", field="model")
    if not alpha >= 0 or not math.isfinite(alpha):
        raise InputError(f"must be a number at least 0, got {alpha}", field="alpha")
    if resamples < 0:
        raise InputError(f"must be 0 or more, got {resamples}", field="intervals")
    answers = preference_answers(study)
    by_query: dict[int, list[Answer]] = defaultdict(list)
    for answer in answers:
        by_query[answer.query].append(answer)
    rng = np.random.default_rng(seed)
    labels = dict(
        Passage.objects.filter(pk__in={p for a in answers for p in a.passages}).values_list("pk", "external_id")
    )
    query_names = dict(Query.objects.filter(pk__in=by_query).values_list("pk", "external_id"))
    queries = {}
    for query_id in sorted(by_query, key=query_names.__getitem__):
        queries[query_names[query_id]] = _query_section(model, by_query[query_id], labels, alpha, resamples, rng)
    report = {
        "study": study.pk,
        "model": model,
        "alpha": alpha,
        "ties": "half a win to each side; 'both bad' is left out of the fit",
        "judgments": len(answers),
        "both_bad_answers": sum(answer.groups is None for answer in answers),
        "intervals": {
            "level": CONFIDENCE_LEVEL,
            "method": "percentile bootstrap over each query's answers",
            "resamples": resamples,
            "seed": seed,
        },
        "queries": queries,
    }
    if study.collection.kind == Collection.Kind.ANSWERS:
        report["systems"] = system_scores(study, answers, model, alpha)
    return report


def _query_section(model, answers, labels, alpha, resamples, rng) -> dict:
    passages = scored_passages(answers)
    shown = Counter(p for answer in answers for p in answer.passages)
    bad = Counter(p for answer in answers if answer.groups is None for p in answer.passages)
    section = {"judgments": len(answers), "scores": {}, "ranking": [], "intervals": {}, "wins": {}}
    if passages:
        scores = fit(model, passages, answers, alpha)
        games = records([answer for answer in answers if answer.groups is not None])
        wins = {p: games[p]["wins"] + games[p]["ties"] / 2 for p in passages}
        order = sorted(range(len(passages)), key=lambda i: (-scores[i], -wins[passages[i]], labels[passages[i]]))
        section["scores"] = {labels[p]: float(score) for p, score in zip(passages, scores, strict=True)}
        section["ranking"] = [labels[passages[i]] for i in order]
        section["wins"] = {labels[p]: wins[p] for p in passages}
        if resamples:
            bounds = bootstrap_intervals(model, passages, answers, alpha, resamples, rng)
            section["intervals"] = {labels[p]: [float(low), float(high)] for p, (low, high) in zip(passages, bounds)}
    section["comparisons"] = {labels[p]: count for p, count in shown.items()}
    section["both_bad"] = {labels[p]: bad[p] / shown[p] for p in shown}
    return section


def system_scores(study: Study, answers: Sequence[Answer], model: str, alpha: float) -> dict:
    """Arena-style: in a study of generated answers (one run per system), each answer stands
    for its system, and all queries' answers are pooled into one fit over the systems; with
    each system's wins, ties and losses in the pairs it took part in."""
    run_ids = (study.parameters or {}).get("runs") or []
    system_of = {
        (query_id, passage_id): run_id
        for run_id, query_id, passage_id in Hit.objects.filter(run_id__in=run_ids).values_list(
            "run_id", "query_id", "passage_id"
        )
    }
    names = {run.pk: run.name or str(run) for run in Run.objects.filter(pk__in=run_ids)}
    stand_ins = [
        Answer(
            answer.item,
            answer.query,
            answer.annotator,
            tuple(system_of[answer.query, p] for p in answer.passages),
            answer.groups,
        )
        for answer in answers
        if answer.groups is not None and all((answer.query, p) in system_of for p in answer.passages)
    ]
    if not stand_ins:
        return {}
    systems = scored_passages(stand_ins)
    scores = fit(model, systems, stand_ins, alpha)
    games = records(stand_ins)
    return {
        names[run_id]: {"run": run_id, "score": float(score), **games[run_id]}
        for run_id, score in sorted(zip(systems, scores, strict=True), key=lambda pair: -pair[1])
    }


def records(answers: Sequence[Answer]) -> dict[int, dict[str, int]]:
    """Per passage (or system), its wins, ties and losses over every pair of the ordered answers."""
    found: dict[int, Counter] = defaultdict(Counter)
    for answer in answers:
        level = {answer.passages[p]: depth for depth, group in enumerate(answer.groups) for p in group}
        for first_at, first in enumerate(answer.passages):
            for second in answer.passages[first_at + 1 :]:
                if level[first] == level[second]:
                    found[first]["ties"] += 1
                    found[second]["ties"] += 1
                else:
                    winner, loser = (first, second) if level[first] < level[second] else (second, first)
                    found[winner]["wins"] += 1
                    found[loser]["losses"] += 1
    return {key: {"wins": c["wins"], "ties": c["ties"], "losses": c["losses"]} for key, c in found.items()}


# --- qrels and the human run ----------------------------------------------------------------------


def preference_grades(section: dict) -> dict[str, int]:
    """A query's preference qrels (see the module docstring): passage external id -> grade."""
    ranking, scores = section["ranking"], section["scores"]
    grades, grade = {}, len(ranking)
    for place, passage in enumerate(ranking):
        if place and scores[passage] < scores[ranking[place - 1]]:
            grade = len(ranking) - place
        grades[passage] = 0 if section["both_bad"].get(passage, 0) > 0.5 else grade
    return grades


def preference_qrels(report: dict) -> list[tuple[str, str, int]]:
    """(query, passage, grade) for every scored passage of every query, in ranking order."""
    return [
        (query, passage, grade)
        for query, section in report["queries"].items()
        for passage, grade in preference_grades(section).items()
    ]


def save_human_run(study: Study, report: dict, name: str | None = None) -> Run:
    """The human ranking as a finished run on the study's collection (retriever kind "human"),
    covering the study's queries, each ranked passage with its score: run pages, evaluate_run
    and compare_runs treat it like any run."""
    retriever, _ = Retriever.objects.get_or_create(name=HUMAN_RETRIEVER, defaults={"kind": Retriever.Kind.HUMAN})
    if retriever.kind != Retriever.Kind.HUMAN:
        raise InputError(f"a retriever named {HUMAN_RETRIEVER!r} exists and is not a human ranking", field="name")
    name = name or f"human ranking of study {study.pk} ({report['model']})"
    queries = dict(
        Query.objects.filter(collection=study.collection, external_id__in=report["queries"]).values_list(
            "external_id", "pk"
        )
    )
    passages = dict(
        Passage.objects.filter(
            collection=study.collection,
            external_id__in={p for section in report["queries"].values() for p in section["scores"]},
        ).values_list("external_id", "pk")
    )
    rankings = {
        queries[query]: [(passages[p], section["scores"][p]) for p in section["ranking"]]
        for query, section in report["queries"].items()
        if section["ranking"]
    }
    if not rankings:
        raise InputError(f"study {study.pk} has no answer with an order yet", field="study")
    parameters = {"study": study.pk, "model": report["model"], "alpha": report["alpha"]}
    return save_ranked_run(
        study.collection,
        name=name,
        retriever=retriever,
        rankings=rankings,
        parameters=parameters,
        queries=list(rankings),
    )
