"""The qrels sources evaluation offers through retrieval.qrels_sources (registered when the app
starts, evaluation/apps.py): a relevance study's aggregated labels (`study:ID`, optionally
`study:ID:mean|median|majority`) and a judge's labels (`judge:NAME`). Both go through the qrels
export of evaluation.qrels, so a leaderboard under a study's labels uses exactly the file
`export_qrels` writes.

A judge's labels are gathered by the readers in JUDGE_LABEL_READERS, each `(collection, judge)
-> {(query external id, passage external id): label}`, later readers overriding earlier ones:
the judge's answers to the items of the collection's relevance studies (the aggregate of its
samples, as `export_qrels --source judge` gives; a pair asked in several studies takes the
newest study's label), then its answers on (query, passage) pairs (judges.pools: a pool it
labelled, labels imported as its own, a run it reranked), which override them."""

from __future__ import annotations

from django.db.models import Q

from annotation.models import Study
from annotation.services import get_study
from evaluation.qrels import aggregate_labels, relevance_qrels
from judges.models import Judge, JudgeAnswer
from judges.services import get_judge
from retrieval.errors import InputError
from retrieval.models import Collection
from retrieval.qrels_sources import Qrels, judgments_from_external_ids


def _on_qrels(error: InputError) -> InputError:
    return InputError(error.message, field="qrels")


def relevance_studies(collection: Collection):
    return Study.objects.filter(collection=collection, kind=Study.Kind.RELEVANCE).order_by("pk")


def study_qrels(collection: Collection, argument: str) -> Qrels:
    """`study:ID[:AGGREGATE]`: the study's aggregated human labels (adjudications applied)."""
    study_id, _, aggregate = argument.partition(":")
    if not study_id.isdecimal():
        raise InputError(f"study:{argument} does not name a study id", field="qrels")
    study = get_study(int(study_id), field="qrels")
    if study.collection_id != collection.pk:
        raise InputError(f"study {study.pk} is not on collection {collection.name}", field="qrels")
    try:
        export = relevance_qrels(study, aggregate or "majority")
    except InputError as error:
        raise _on_qrels(error) from None
    source = f"study:{study.pk}" + (f":{aggregate}" if aggregate else "")
    labels = {(qrel.query, qrel.passage): qrel.relevance for qrel in export.qrels}
    judgments = judgments_from_external_ids(collection, labels, lambda problem: f"{source}: {problem}")
    label = f"study {study.pk} “{study.name}” ({export.aggregate} of the annotators' labels)"
    return Qrels(collection, source, label, judgments, details=export.summary(), origin=study)


def study_choices(collection: Collection) -> list[tuple[str, str]]:
    return [(f"study:{study.pk}", f"study {study.pk}: {study.name}") for study in relevance_studies(collection)]


def study_item_labels(collection: Collection, judge: Judge) -> dict[tuple[str, str], int]:
    """The judge's labels on the items of the collection's relevance studies, oldest study
    first so that a newer study's label of the same pair wins."""
    answered = set(
        JudgeAnswer.objects.filter(judge=judge, item__study__collection=collection).values_list(
            "item__study_id", flat=True
        )
    )
    labels: dict[tuple[str, str], int] = {}
    for study in relevance_studies(collection).filter(pk__in=answered):
        export = relevance_qrels(study, source="judge", judge=judge)
        labels.update({(qrel.query, qrel.passage): qrel.relevance for qrel in export.qrels})
    return labels


def pair_labels(collection: Collection, judge: Judge) -> dict[tuple[str, str], int]:
    """The judge's labels on (query, passage) pairs of the collection (a pool it labelled, labels
    imported as its own, pairs it scored for a rerank): per pair the answers to its newest
    prompt (an edited template's), their readable labels (or scores) aggregated by majority,
    ties to the lower one (export_qrels' rule)."""
    answers = JudgeAnswer.objects.filter(judge=judge, item__isnull=True, query__collection=collection)
    rows = answers.values_list("pk", "query__external_id", "passage__external_id", "prompt_hash", "parsed")
    prompts: dict[tuple[str, str], dict[str, tuple[int, list[int]]]] = {}
    for pk, query, passage, prompt_hash, parsed in rows.iterator(chunk_size=20_000):
        newest, values = prompts.setdefault((query, passage), {}).get(prompt_hash, (0, []))
        value = (parsed or {}).get("label", (parsed or {}).get("score"))
        prompts[(query, passage)][prompt_hash] = (max(newest, pk), values + ([value] if value is not None else []))
    labels = {}
    for pair, by_prompt in prompts.items():
        _, values = max(by_prompt.values(), key=lambda entry: entry[0])
        if values:
            labels[pair] = aggregate_labels(values, "majority", ())[0]
    return labels


JUDGE_LABEL_READERS = (study_item_labels, pair_labels)


def judge_qrels(collection: Collection, name: str) -> Qrels:
    """`judge:NAME`: the labels of the judge's latest version (JUDGE_LABEL_READERS)."""
    judge = get_judge(name, field="qrels")
    labels: dict[tuple[str, str], int] = {}
    for reader in JUDGE_LABEL_READERS:
        labels.update(reader(collection, judge))
    if not labels:
        raise InputError(f"judge {name!r} has no labels on collection {collection.name}", field="qrels")
    source = f"judge:{judge.name}"
    judgments = judgments_from_external_ids(collection, labels, lambda problem: f"{source}: {problem}")
    return Qrels(collection, source, f"judge {judge.name} (version {judge.version})", judgments, origin=judge)


def judge_choices(collection: Collection) -> list[tuple[str, str]]:
    on_studies = Q(answers__item__study__collection=collection, answers__item__study__kind=Study.Kind.RELEVANCE)
    on_pairs = Q(answers__item__isnull=True, answers__query__collection=collection)
    names = Judge.objects.filter(on_studies | on_pairs).values_list("name", flat=True).distinct().order_by("name")
    return [(f"judge:{name}", f"judge {name}") for name in names]
