"""A study as a Hugging Face `datasets` dataset: one row per item with what was shown (context,
candidates in display order), its known answer (staff data: the gold candidate, or a gold or
qualification item's expected label), every human answer, and model or judge answers.

Model and judge answers come from answer sources: the runs given (`model_runs`: a proxy item's
answer is the run's highest-scoring shown candidate, as in the study report; a label item's is
the run's score for the pair) and every callable named in the MARGINALIA_DATASET_ANSWER_SOURCES
setting (dotted paths), so another app (e.g. judges/) adds its answers without this app importing
it. A source is `source(study) -> {item id: [answer, ...]}`, an answer a dict with any of
`source`, `model`, `position`, `label`, `score`, `rationale`.

Each work item also carries its label and where it comes from (annotation.provenance): `label`
(JSON text: the decided answer, the unanimous one, or the majority vote), `label_source`
(adjudicated, unanimous, single, aggregated, sent_back, unjudged), `label_method` (majority, for
an aggregated label) and `reworks` (times it was sent back); null on gold and qualification items.

Labels are JSON text (`label`, `expected_label`) so that every kind's labels fit one schema.
Written as a Parquet file (`items.parquet`, readable by `datasets.load_dataset("parquet", ...)`,
pandas, pyarrow) or with `Dataset.save_to_disk`; into a new folder, whole or not at all.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import datasets
from django.conf import settings
from django.utils.module_loading import import_string

from annotation.models import Item, ItemCandidate, Judgment, Study
from annotation.provenance import ItemLabel, item_labels
from annotation.selectors import context_sentences
from evaluation.selectors import ShownCandidate, ShownItem, run_scores
from evaluation.services import model_answers
from retrieval.errors import InputError
from retrieval.models import Run

FORMATS = ("parquet", "disk")
PARQUET_FILE = "items.parquet"

CANDIDATE = {
    "candidate": datasets.Value("int64"),
    "position": datasets.Value("int32"),
    "passage": datasets.Value("string"),
    "text": datasets.Value("string"),
    "is_gold": datasets.Value("bool"),
}
HUMAN_ANSWER = {
    "annotator": datasets.Value("string"),
    "position": datasets.Value("int32"),
    "label": datasets.Value("string"),
    "selections": datasets.Sequence(datasets.Value("int32")),
    "rationale": datasets.Value("string"),
    "seconds": datasets.Value("float64"),
    "voided": datasets.Value("bool"),
}
MODEL_ANSWER = {
    "source": datasets.Value("string"),
    "model": datasets.Value("string"),
    "position": datasets.Value("int32"),
    "label": datasets.Value("string"),
    "score": datasets.Value("float64"),
    "rationale": datasets.Value("string"),
}
FEATURES = datasets.Features(
    {
        "study": datasets.Value("int64"),
        "item": datasets.Value("int64"),
        "position": datasets.Value("int32"),
        "role": datasets.Value("string"),
        "kind": datasets.Value("string"),
        "query": datasets.Value("string"),
        "query_text": datasets.Value("string"),
        "context_left": datasets.Sequence(datasets.Value("string")),
        "context_right": datasets.Sequence(datasets.Value("string")),
        "candidates": [CANDIDATE],
        "gold_position": datasets.Value("int32"),
        "expected_label": datasets.Value("string"),
        "label": datasets.Value("string"),
        "label_source": datasets.Value("string"),
        "label_method": datasets.Value("string"),
        "reworks": datasets.Value("int32"),
        "human_answers": [HUMAN_ANSWER],
        "model_answers": [MODEL_ANSWER],
    }
)

AnswerSource = Callable[[Study], dict[int, list[dict]]]


def study_dataset(study: Study, *, model_runs: list[Run] = ()) -> datasets.Dataset:
    """The study's items, one row each in study order (see the module docstring)."""
    items = list(Item.objects.filter(study=study).select_related("query").order_by("position"))
    candidates, passage_ids = _candidates(study)
    humans = _human_answers(study)
    machines = _model_answers(study, items, candidates, passage_ids, model_runs)
    labels = item_labels(study, [item.pk for item in items if item.role == Item.Role.WORK])
    rows = []
    for item in items:
        shown = candidates.get(item.pk, [])
        left, right = context_sentences(item.query, study.context_left, study.context_right)
        gold = next((c["position"] for c in shown if c["is_gold"]), None)
        rows.append(
            {
                "study": study.pk,
                "item": item.pk,
                "position": item.position,
                "role": item.role,
                "kind": study.kind,
                "query": item.query.external_id,
                "query_text": item.query.text,
                "context_left": left,
                "context_right": right,
                "candidates": shown,
                "gold_position": gold if study.kind == Study.Kind.PROXY else None,
                "expected_label": _json(item.expected_label),
                **_label_columns(labels.get(item.pk)),
                "human_answers": humans.get(item.pk, []),
                "model_answers": machines.get(item.pk, []),
            }
        )
    return datasets.Dataset.from_list(rows, features=FEATURES)


def _label_columns(label: ItemLabel | None) -> dict:
    """The item's label and provenance columns (all null for gold and qualification items)."""
    if label is None:
        return dict.fromkeys(("label", "label_source", "label_method", "reworks"))
    return {
        "label": _json(label.fields()["item_label"]),
        "label_source": label.source,
        "label_method": label.method,
        "reworks": label.reworks,
    }


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _candidates(study: Study) -> tuple[dict[int, list[dict]], dict[int, list[int]]]:
    """Each item's candidates as shown (dataset rows), and their passage ids (for model scores)."""
    shown, passage_ids = defaultdict(list), defaultdict(list)
    rows = (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "pk", "position", "passage_id", "passage__external_id", "passage__text", "is_gold")
    )
    for item_id, pk, position, passage_id, passage, text, is_gold in rows:
        shown[item_id].append(
            {"candidate": pk, "position": position, "passage": passage, "text": text, "is_gold": is_gold}
        )
        passage_ids[item_id].append(passage_id)
    return shown, passage_ids


def _human_answers(study: Study) -> dict[int, list[dict]]:
    answers = defaultdict(list)
    judgments = (
        Judgment.objects.filter(item__study=study)
        .select_related("annotator", "choice")
        .order_by("item_id", "submitted_at", "pk")
    )
    for judgment in judgments:
        answers[judgment.item_id].append(
            {
                "annotator": judgment.annotator.username,
                "position": judgment.choice.position if judgment.choice_id else None,
                "label": _json(judgment.label),
                "selections": list(judgment.selections or []),
                "rationale": judgment.rationale,
                "seconds": judgment.seconds,
                "voided": judgment.voided,
            }
        )
    return answers


def _model_answers(
    study: Study, items: list[Item], candidates: dict, passage_ids: dict, model_runs
) -> dict[int, list[dict]]:
    answers = defaultdict(list)
    shown = [
        ShownItem(
            item.pk,
            item.position,
            item.query_id,
            item.query.external_id,
            tuple(
                ShownCandidate(c["candidate"], c["position"], passage_id, c["passage"], c["is_gold"])
                for c, passage_id in zip(candidates.get(item.pk, []), passage_ids.get(item.pk, []), strict=True)
            ),
        )
        for item in items
    ]
    for run in model_runs:
        model = f"run {run.pk}: {run.retriever}"
        if study.kind == Study.Kind.PROXY:
            for item_id, answer in model_answers(run, study, shown).items():
                if answer is not None:
                    answers[item_id].append({"source": "run", "model": model, "position": answer.position})
        else:
            scores = run_scores(run, study)
            for item in shown:
                for candidate in item.candidates:
                    score = scores.get((item.query_id, candidate.passage_id))
                    if score is not None:
                        answers[item.id].append(
                            {"source": "run", "model": model, "position": candidate.position, "score": score[0]}
                        )
    for path in settings.MARGINALIA_DATASET_ANSWER_SOURCES:
        source: AnswerSource = import_string(path)
        for item_id, extra in source(study).items():
            answers[item_id].extend({"source": path, **answer} for answer in extra)
    return {item_id: [_model_answer(answer) for answer in rows] for item_id, rows in answers.items()}


def _model_answer(answer: dict) -> dict:
    """An answer in the dataset's schema (absent fields null; labels as JSON text)."""
    return {
        "source": answer.get("source"),
        "model": answer.get("model"),
        "position": answer.get("position"),
        "label": _json(answer.get("label")),
        "score": answer.get("score"),
        "rationale": answer.get("rationale"),
    }


def export_dataset(study: Study, out: Path, *, fmt: str = "parquet", model_runs: list[Run] = ()) -> dict:
    """Write the study's dataset into the new folder `out` (Parquet file or save_to_disk)."""
    if fmt not in FORMATS:
        raise InputError(f"must be one of {', '.join(FORMATS)}", field="format")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} exists and is not an empty folder", field="out")
    for run in model_runs:
        if run.collection_id != study.collection_id:
            raise InputError(f"run {run.pk} is on another collection than the study", field="model_run")
    dataset = study_dataset(study, model_runs=model_runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        if fmt == "parquet":
            dataset.to_parquet(str(staging / PARQUET_FILE))
        else:
            dataset.save_to_disk(str(staging))
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "study": study.pk,
        "items": len(dataset),
        "human_answers": sum(len(row) for row in dataset["human_answers"]),
        "model_answers": sum(len(row) for row in dataset["model_answers"]),
        "format": fmt,
        "out": str(out),
        "files": sorted(path.name for path in out.iterdir()),
    }
