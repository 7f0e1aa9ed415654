"""A judge's card (judges.models.JudgeCard, kept with the judge version): what is known about the
version against people on one collection, computed end to end by asking what the judge has not
answered yet.

The pool is the human qrels' pairs: a relevance study's items (`--human study:ID`, asked in the
study's wording) or the collection's qrels pairs (`imported`, asked outside a study: BIRCO's
direct scoring or the judge's built-in prompt). The judge labels it `samples` times
(judges.pools.label_pool); its label of a pair is the majority of its readable samples (ties to
the lower label), as `judge:NAME` qrels read it.
With `sample` (N pairs), the judge is asked only a seeded sample of that pool, stratified by the
human grade within each query (judges.pools.stratified_sample, seed `sample_seed`): the card
says so (`pool.sample`: size, share, strategy, seed), its judge qrels cover the sampled pairs
only, and the leaderboard compares both sides on those pairs (the human qrels restricted to the
sample; every pair outside it unjudged, so not relevant, on both sides). Then:
- items: agreement with the human labels (evaluation.judge_agreement.label_agreement_section:
  Cohen's kappa of relevant / not relevant per query and overall, identical labels, confusion);
- leaderboard: with two or more runs, the comparison of their leaderboards under both labels
  (evaluation.judge_agreement.compare_leaderboards);
- position: with a proxy study (`probe_study`), its work items asked again with the candidates
  turned by one place (judges.probes): how often the judge chose the same candidate, how often
  the same place (a judge that follows the position), and how its choices spread over places;
- length: the least-squares slope of the label against the passage's length in words (per 100
  words), labels divided by the top of their scale (the judge's prompt's, the humans' largest
  label) so the judge's slope stands next to the humans' on the same pairs, with Spearman's rho;
- calibration (samples >= 2): on relevant / not relevant, the share of the judge's samples that
  agree with its majority (its confidence) against whether that majority is the humans' label:
  expected calibration error over CALIBRATION_BINS equal-width bins, sum of bin share x
  |accuracy - confidence|, and the bins themselves;
- self-consistency (samples >= 2): evaluation.judge_report.self_consistency over the samples;
- unparseable: the share of the pool's stored answers that could not be read.
The prompt is kept with the card (the template's name, text and SHA-256, the task objective),
so cards of versions that differ by prompt can be compared.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import stats

from annotation.majority import MajorityVote, majority_votes
from annotation.models import Study
from annotation.services import get_study
from evaluation.agreement import finite_or_none
from evaluation.judge_agreement import (
    bootstrap_options,
    compare_leaderboards,
    count_option,
    human_qrels_for,
    label_agreement_section,
)
from evaluation.judge_report import self_consistency
from evaluation.leaderboard import board_runs, leaderboard_measures
from jobs.progress import Progress, no_progress
from judges.models import Judge, JudgeCard
from judges.pools import (
    PoolPair,
    check_sample_size,
    label_pool,
    pool_answers,
    pool_strata,
    qrels_pool,
    stratified_sample,
    study_pool,
)
from judges.probes import ProbedItem, position_probe
from judges.prompts import prompts_folder
from judges.services import MAX_SAMPLES, PROMPTED
from retrieval.errors import InputError
from retrieval.models import Collection
from retrieval.qrels_sources import Qrels

CALIBRATION_BINS = 10
LENGTH_UNIT = 100  # words
SAMPLE_STRATEGY = (
    "stratified by human grade within each query: one pair of every (query, grade) first, the rest in proportion"
    " to what each has left (largest remainder), random.Random(seed)"
)


def _majority(values: Sequence[int]) -> MajorityVote:
    """The judge's vote over its samples of a pair, a tie going to the lower label (aggregate_labels'
    rule for the humans)."""
    return majority_votes([values], tie_rule="lowest")[0]


def _label(parsed: dict | None) -> int | None:
    return None if parsed is None else parsed.get("label", parsed.get("score"))


def length_section(pairs: Sequence[PoolPair], human: Qrels, judge: dict, judge_top: float) -> dict | None:
    """Slopes of the label (divided by the top of its scale) on the passage's length in words,
    per LENGTH_UNIT words, for the judge and the humans on the pairs both labelled."""
    rows = [
        (len(pair.passage.text.split()), human.judgments[pair.query.pk][pair.passage.pk], judge[key])
        for pair in pairs
        if (key := (pair.query.pk, pair.passage.pk)) in judge
        and pair.passage.pk in human.judgments.get(pair.query.pk, {})
    ]
    lengths = np.array([length for length, _, _ in rows], dtype=float)
    if len(rows) < 3 or np.ptp(lengths) == 0:
        return None
    human_top = max(max(label for _, label, _ in rows), 1)
    section = {"pairs": len(rows), "unit_words": LENGTH_UNIT, "mean_words": float(lengths.mean())}
    for side, values in (
        ("judge", [label / judge_top for *_, label in rows]),
        ("human", [label / human_top for _, label, _ in rows]),
    ):
        constant = np.ptp(values) == 0
        section[f"{side}_slope"] = 0.0 if constant else float(stats.linregress(lengths, values).slope * LENGTH_UNIT)
        section[f"{side}_spearman"] = (
            None if constant else finite_or_none(float(stats.spearmanr(lengths, values).statistic))
        )
    section["difference"] = section["judge_slope"] - section["human_slope"]
    return section


def calibration_section(answers: dict, human: Qrels) -> dict | None:
    """Expected calibration error of the judge's vote share on relevant / not relevant against
    the human label (see the module docstring); None without two samples on any pair."""
    rows = []
    for (query_id, passage_id), parsed in answers.items():
        votes = [int(label > 0) for label in map(_label, parsed) if label is not None]
        relevance = human.judgments.get(query_id, {}).get(passage_id)
        if len(parsed) < 2 or not votes or relevance is None:
            continue
        vote = _majority(votes)
        rows.append((vote.votes / vote.raters, vote.label == int(relevance > 0)))
    if not rows:
        return None
    bins, error = [], 0.0
    for index in range(CALIBRATION_BINS):
        low, high = index / CALIBRATION_BINS, (index + 1) / CALIBRATION_BINS
        inside = [
            (confidence, right)
            for confidence, right in rows
            if low < confidence <= high or (index == 0 and confidence == 0)
        ]
        if not inside:
            continue
        confidence = float(np.mean([c for c, _ in inside]))
        accuracy = float(np.mean([r for _, r in inside]))
        error += len(inside) / len(rows) * abs(accuracy - confidence)
        bins.append({"low": low, "high": high, "pairs": len(inside), "confidence": confidence, "accuracy": accuracy})
    return {"pairs": len(rows), "ece": error, "bins": bins, "on": "relevant (label > 0) or not"}


def position_section(probed: Sequence[ProbedItem]) -> dict:
    both = [entry for entry in probed if entry.first is not None and entry.turned is not None]
    places = Counter(
        place for entry in probed for place in (entry.first_place, entry.turned_place) if place is not None
    )
    return {
        "items": len(probed),
        "answered_both": len(both),
        "same_candidate": sum(entry.first == entry.turned for entry in both) / len(both) if both else None,
        "follows_position": sum(entry.first_place == entry.turned_place for entry in both) / len(both)
        if both
        else None,
        "place_counts": {str(place): places[place] for place in sorted(places)},
        "order": "shown order, then turned by one place (the first candidate listed last)",
    }


def _template(name: str) -> dict:
    text = (prompts_folder() / f"{name}.txt").read_text(encoding="utf-8")
    return {"name": name, "sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text}


def prompt_record(judge: Judge, objective: str, probe: bool) -> dict:
    if judge.backend not in PROMPTED:
        return {"name": judge.backend, "file": judge.settings.get("file"), "sha256": judge.settings.get("sha256")}
    record = {**_template(judge.settings.get("prompt") or "relevance"), "objective": objective}
    if probe:
        record["probe"] = _template("proxy")
    return record


def card_options(
    judge: Judge,
    collection: Collection,
    *,
    human: str | None = None,
    run_ids: Sequence = (),
    metrics=None,
    probe_study: int | None = None,
    samples: int = 1,
    seed=None,
    bootstrap=None,
    objective: str = "",
    sample=None,
    sample_seed=None,
) -> dict:
    """The card's options checked before any work (InputError naming the field): what a job
    is queued with."""
    if judge.backend == Judge.Backend.RUN:
        raise InputError(f"judge {judge} answers from a run: it gives no labels to put on a card", field="judge")
    if not 1 <= int(samples) <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")
    if judge.backend not in PROMPTED and int(samples) != 1:
        raise InputError(f"judge {judge} was imported: it has one label per pair", field="samples")
    human_qrels = human_qrels_for(collection, human)
    run_ids = [str(run) for run in run_ids]
    if run_ids:
        board_runs(collection, run_ids)
    leaderboard_measures(metrics)
    if probe_study is not None:
        study = get_study(probe_study, field="probe_study")
        if study.kind != Study.Kind.PROXY:
            raise InputError(
                f"study {study.pk} is a {study.kind} study; the probe needs proxy items", field="probe_study"
            )
        if judge.backend not in PROMPTED:
            raise InputError(f"judge {judge} answers no prompts to probe", field="probe_study")
    seed, resamples = bootstrap_options(seed, bootstrap)
    sample, sample_seed = sample_options(sample, sample_seed, human_qrels)
    return {
        "collection": collection.pk,
        "human": human_qrels.source,
        "run_ids": run_ids,
        "metrics": metrics or "",
        "probe_study": probe_study,
        "samples": int(samples),
        "seed": seed,
        "bootstrap": resamples,
        "objective": objective,
        "sample": sample,
        "sample_seed": sample_seed,
    }


def sample_options(sample, sample_seed, human: Qrels) -> tuple[int | None, int]:
    """(pairs to sample or None for the whole pool, seed) from numbers or ASCII digits: at
    least one pair of each (query, grade) of the human labels."""
    seed = 0 if sample_seed in (None, "") else count_option(sample_seed, "sample_seed", 2**32 - 1)
    if sample in (None, ""):
        return None, seed
    size = count_option(sample, "sample", 10**7)
    check_sample_size(size, pool_strata(human.judgments))
    return size, seed


def sampled_human(human: Qrels, pairs: Sequence[PoolPair]) -> Qrels:
    """The human qrels on the sampled pairs only, every query kept (the others unjudged)."""
    kept = {(pair.query.pk, pair.passage.pk) for pair in pairs}
    judgments = {
        query_id: {pk: label for pk, label in passages.items() if (query_id, pk) in kept}
        for query_id, passages in human.judgments.items()
    }
    return Qrels(
        human.collection, human.source, f"{human.label}, on the judge's sample", judgments, origin=human.origin
    )


def judge_card(judge: Judge, options: dict, *, user=None, progress: Progress = no_progress) -> JudgeCard:
    """Compute and keep the card of `judge` with `options` (card_options); asks the judge what
    it has not answered (the pool `samples` times, the probe's items in both orders)."""
    collection = Collection.objects.get(pk=options["collection"])
    human = human_qrels_for(collection, options["human"])
    samples, objective = options["samples"], options.get("objective", "")
    if isinstance(human.origin, Study):
        pairs = study_pool(human.origin, judge)
    else:
        pairs = qrels_pool(collection, judge, objective)
    pool_size, sample = len(pairs), None
    if options.get("sample") is not None:
        pairs = stratified_sample(pairs, human.judgments, options["sample"], options["sample_seed"])
        sample = {
            "size": len(pairs),
            "of": pool_size,
            "share": len(pairs) / pool_size,
            "seed": options["sample_seed"],
            "strategy": SAMPLE_STRATEGY,
            "strata": pool_strata(human.judgments),
            "covers": "the judge's qrels cover the sampled pairs only; the leaderboard compares both sides on them"
            " (the human qrels restricted to the sample, every other pair unjudged: not relevant)",
        }
    if judge.backend in PROMPTED:
        tally = label_pool(judge, pairs, samples, lambda f, m: progress(0.75 * f, m))
    answers = pool_answers(judge, pairs, samples)
    if judge.backend not in PROMPTED:  # imported: one label per pair, nothing unreadable
        tally = {"answered": sum(parsed[0] is not None for parsed in answers.values()), "failed": 0, "asked": 0}
    labels = {
        pair: _majority(values).label
        for pair, parsed in answers.items()
        if (values := [v for v in map(_label, parsed) if v is not None])
    }
    judgments: dict[int, dict[int, int]] = {}
    for (query_id, passage_id), label in labels.items():
        judgments.setdefault(query_id, {})[passage_id] = label
    judge_qrels = Qrels(
        collection, f"judge:{judge.name}", f"judge {judge.name} (version {judge.version})", judgments, origin=judge
    )
    leaderboard = None
    if options["run_ids"]:
        progress(0.8, "comparing the leaderboards")
        runs = board_runs(collection, options["run_ids"])
        named = leaderboard_measures(options["metrics"])
        leaderboard = compare_leaderboards(
            runs,
            named,
            human if sample is None else sampled_human(human, pairs),
            judge_qrels,
            seed=options["seed"],
            samples=options["bootstrap"],
        )
    position = None
    if options["probe_study"] is not None:
        study = get_study(options["probe_study"], field="probe_study")
        position = position_section(position_probe(judge, study, lambda f, m: progress(0.8 + 0.15 * f, m)))
    judge_top = max(pairs[0].prompt.options) if judge.backend in PROMPTED else max([*labels.values(), 1])
    stored = tally["answered"] + tally["failed"]
    payload = {
        "judge": {"name": judge.name, "version": judge.version, "backend": judge.backend, "settings": judge.settings},
        "collection": collection.name,
        "human": human.source,
        "human_label": human.label,
        "pool": {"pairs": len(pairs), "samples": samples, "labelled": len(labels), **tally, "sample": sample},
        "unparseable": {
            "answers": stored,
            "failed": tally["failed"],
            "share": tally["failed"] / stored if stored else None,
        },
        "items": label_agreement_section(human, judge_qrels),
        "leaderboard": leaderboard,
        "position": position,
        "length": length_section(pairs, human, labels, judge_top),
        "calibration": calibration_section(answers, human) if samples >= 2 else None,
        "self_consistency": self_consistency(
            {f"{q}:{p}": list(map(_label, parsed)) for (q, p), parsed in answers.items()}, ("nominal", "interval")
        )
        if samples >= 2
        else None,
        "options": {key: value for key, value in options.items() if key not in ("collection", "objective")},
    }
    progress(1.0, "card computed")
    return JudgeCard.objects.create(
        judge=judge,
        collection=collection,
        human=human.source,
        prompt=prompt_record(judge, objective, options["probe_study"] is not None),
        payload=payload,
        created_by=user,
    )
