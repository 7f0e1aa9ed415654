"""Judges in study reports, every figure recomputed with independent implementations (sklearn,
krippendorff, statsmodels, scipy) from the exports alone: export_study / the judgments export
for the humans, export_judge_answers for the judge."""

import json
from collections import Counter
from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from annotation.selectors import judgment_rows
from judges.asking import judge_study
from judges.models import JudgeAnswer
from judges.prompts import item_prompt
from judges.services import register_judge
from tests.factories import (
    add_judgment,
    add_label_judgment,
    call_json_command,
    export_study,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
)

pytestmark = pytest.mark.django_db

LEVELS = {"nominal": "nominal", "ordinal": "ordinal", "interval": "interval"}


def exported_judge_answers(study, judge: str) -> list[dict]:
    out = StringIO()
    call_command("export_judge_answers", str(study.pk), "--judge", judge, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def kappa_or_nan(first, second, values, weights=None) -> float:
    if not first:
        return float("nan")
    with np.errstate(all="ignore"):
        return cohen_kappa_score(first, second, labels=values, weights=weights)


def alpha_or_nan(matrix, level, values) -> float:
    if matrix.size == 0 or not (np.sum(~np.isnan(matrix), axis=0) >= 2).any():
        return float("nan")  # no unit rated twice: undefined
    try:
        return krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=values)
    except ValueError:
        return float("nan")


def expected_label_figures(study, judge: str, values: list[int]) -> dict:
    """The judge's label figures from the exports, with sklearn and krippendorff."""
    humans: dict[int, dict[str, int]] = {}
    for row in judgment_rows(study):
        if not row["voided"] and row["role"] == "work":
            humans.setdefault(row["item"], {})[row["annotator"]] = row["label"]
    judged = {row["item"]: row["label"] for row in exported_judge_answers(study, judge) if row["sample"] == 0}
    majority = {}
    for item, labels in humans.items():
        counts = Counter(labels.values()).most_common()
        if len(counts) == 1 or counts[0][1] > counts[1][1]:
            majority[item] = counts[0][0]
    shared = [item for item in majority if judged.get(item) is not None]
    first, second = [judged[i] for i in shared], [majority[i] for i in shared]
    figures = {
        "kappa": kappa_or_nan(first, second, values),
        "kappa_quadratic": kappa_or_nan(first, second, values, "quadratic"),
        "alpha_vs_majority": alpha_or_nan(np.array([first, second], dtype=float), "ordinal", values),
        "confusion": confusion_matrix(second, first, labels=values).tolist()
        if shared
        else [[0] * len(values)] * len(values),
    }
    annotators = sorted({name for labels in humans.values() for name in labels})
    items = sorted(humans)
    matrix = np.array([[humans[i].get(a, np.nan) for i in items] for a in annotators], dtype=float)
    judge_row = np.array([[judged.get(i, np.nan) if judged.get(i) is not None else np.nan for i in items]])
    figures["alpha_humans"] = alpha_or_nan(matrix, "interval", values)
    figures["alpha_with_judge"] = alpha_or_nan(np.vstack([matrix, judge_row]), "interval", values)
    figures["per_annotator_kappa"] = {}
    for name in annotators:
        pairs = [(judged[i], humans[i][name]) for i in items if name in humans[i] and judged.get(i) is not None]
        figures["per_annotator_kappa"][name] = kappa_or_nan([p[0] for p in pairs], [p[1] for p in pairs], values)
    figures["humans_agree_judge_differs"] = sorted(
        i
        for i in items
        if len(humans[i]) >= 2
        and len(set(humans[i].values())) == 1
        and judged.get(i) not in (None, *humans[i].values())
    )
    return figures


def same(got, expected) -> bool:
    """The report's figure (None where undefined) equals the independent one (NaN where undefined)."""
    if expected is None or np.isnan(expected):
        return got is None
    return got == pytest.approx(expected, abs=1e-9)


def check_label_report(report: dict, study, judge: str, values: list[int]) -> None:
    section = report["judges"][judge]
    expected = expected_label_figures(study, judge, values)
    versus = section["vs_majority"]
    assert same(versus["cohen_kappa"]["unweighted"], expected["kappa"])
    if "quadratic" in versus["cohen_kappa"]:
        assert same(versus["cohen_kappa"]["quadratic"], expected["kappa_quadratic"])
        assert same(versus["krippendorff_alpha"]["ordinal"], expected["alpha_vs_majority"])
        assert same(section["krippendorff_alpha_humans"]["interval"], expected["alpha_humans"])
        assert same(section["krippendorff_alpha_with_judge"]["interval"], expected["alpha_with_judge"])
    assert section["confusion"]["matrix"] == expected["confusion"]
    for name, kappa in expected["per_annotator_kappa"].items():
        assert same(section["vs_annotators"][name]["cohen_kappa"]["unweighted"], kappa)
    assert (
        sorted(entry["item"] for entry in section["humans_agree_judge_differs"])
        == expected["humans_agree_judge_differs"]
    )


def test_a_relevance_report_puts_the_judge_beside_the_humans_as_sklearn_and_krippendorff_compute_it(staff_client):
    study = make_label_study(items=8, label_schema={"scale": "graded-0-3"})
    items = list(study.items.order_by("position"))
    human_labels = {"ann": [0, 1, 2, 3, 3, 0, 1, 2], "bea": [0, 1, 2, 3, 2, 1, 1, 2], "cal": [0, 2, 2, 3, 3, 0, 0, 2]}
    for name, labels in human_labels.items():
        annotator = make_annotator(name)
        for item, label in zip(items, labels):
            add_label_judgment(item, annotator, label)
    judge = register_judge("gpt", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    first = [0, 2, 2, 1, 3, None, 1, 3]
    second = [0, 2, 1, 1, 3, 0, 1, 3]
    for item, a, b in zip(items, first, second):
        for sample, label in enumerate((a, b)):
            JudgeAnswer.objects.create(
                judge=judge,
                item=item,
                sample=sample,
                prompt_hash=item_prompt(item).hash,
                raw_response=f"SCORE: {label}" if label is not None else "no idea",
                parsed=None if label is None else {"label": label},
                failure_reason="" if label is not None else "no number in the response",
            )

    report = call_json_command("study_report", str(study.pk))

    section = report["judges"]["gpt"]
    assert (section["answers"], section["failed"], section["labelled_units"]) == (16, 1, 7)
    check_label_report(report, study, "gpt", [0, 1, 2, 3])
    page = staff_client.get(f"/studies/{study.pk}/report/").content.decode()
    assert "Judges beside the humans" in page and "gpt v1" in page and "human majority (rows)" in page
    consistency = section["self_consistency"]
    assert (consistency["items"], consistency["all_agree"]) == (7, pytest.approx(6 / 7))
    assert consistency["krippendorff_alpha"]["nominal"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=np.array([first, second], dtype=float),
            level_of_measurement="nominal",
        ),
        abs=1e-9,
    )


def test_qrels_come_from_the_humans_the_judge_or_both():
    study = make_label_study(items=2, label_schema={"scale": "binary"})
    items = list(study.items.order_by("position"))
    for name, labels in {"ann": [1, 0], "bea": [1, 1]}.items():
        annotator = make_annotator(name)
        for item, label in zip(items, labels):
            add_label_judgment(item, annotator, label)
    judge = register_judge("gpt", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})

    for item, label in zip(items, [0, 1]):
        JudgeAnswer.objects.create(judge=judge, item=item, prompt_hash=item_prompt(item).hash, parsed={"label": label})

    def qrels(*options):
        out = StringIO()
        call_command("export_qrels", str(study.pk), *options, stdout=out)
        return [line.split()[-1] for line in out.getvalue().splitlines()]

    assert qrels() == ["1", "0"]  # tie (1, 0) goes to the lower label
    assert qrels("--source", "judge", "--judge", "gpt") == ["0", "1"]
    assert qrels("--source", "both", "--judge", "gpt") == ["1", "1"]


def test_a_proxy_report_gives_a_judges_accuracy_and_mcnemar_against_the_human_majority(staff_client):
    study = make_relic_proxy_study(6)
    judge = register_judge("bm25", "run", {"run": study.negatives_run_id})
    judge_study(study, judge)
    gold = {row["item"]: row["candidates"].index(row["gold"]) for row in export_study(study)}
    items = sorted(gold)
    votes = {0: [0, 0, 0], 1: [1, 1, 1], 2: [0, 1, 2], 3: [2, 2, 0], 4: [1, 1, 1], 5: [0, 0, 0]}
    annotators = [make_annotator(name) for name in ("ann", "bea", "cal")]
    chosen_by_humans = {}
    for number, item_id in enumerate(items):
        positions = [(gold[item_id] + offset) % 3 for offset in votes[number]]
        chosen_by_humans[item_id] = positions
        for annotator, position in zip(annotators, positions):
            add_judgment(study.items.get(pk=item_id), annotator, position)

    report = call_json_command("study_report", str(study.pk))
    page = staff_client.get(f"/studies/{study.pk}/report/").content.decode()

    assert "Judges on the same items" in page and "bm25 v1" in page
    section = report["judges"]["bm25"]
    judged = {row["item"]: row["position"] for row in exported_judge_answers(study, "bm25")}
    judge_right = [judged[i] == gold[i] for i in items]
    humans_right = [sum(p == gold[i] for p in chosen_by_humans[i]) >= 2 for i in items]
    b = sum(j and not h for j, h in zip(judge_right, humans_right))
    c = sum(h and not j for j, h in zip(judge_right, humans_right))
    assert section["accuracy"] == pytest.approx(sum(judge_right) / len(items))
    assert (section["mcnemar"]["judge_only_correct"], section["mcnemar"]["humans_only_correct"]) == (b, c)
    expected_p = 1.0 if b + c == 0 else binomtest(min(b, c), b + c, 0.5).pvalue
    assert section["mcnemar"]["p_value"] == pytest.approx(expected_p, abs=1e-12)
    assert sorted(e["item"] for e in section["humans_agree_judge_differs"]) == sorted(
        i for i in items if len(set(chosen_by_humans[i])) == 1 and judged[i] != chosen_by_humans[i][0]
    )
