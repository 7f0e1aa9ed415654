"""The preference study report: annotators' pairwise agreement (and Krippendorff's alpha against the
krippendorff package), intransitive triples per annotator, runs against the human ranking, and the
report's command and pages; plus the preference scores page and its API twins, staff only."""

from __future__ import annotations

from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command

from annotation.services import import_judgments
from evaluation.preference_report import preference_study_report
from retrieval.models import Retriever, Run
from tests.factories import api_client, call_json_command, make_preference_study, make_user, write_jsonl

pytestmark = pytest.mark.django_db


def pair_items(study) -> dict[frozenset, tuple[int, list[str]]]:
    """{passages of the pair: (item id, the pair's external ids in display order)}."""
    found = {}
    for item in study.items.prefetch_related("candidates__passage"):
        shown = [c.passage.external_id for c in sorted(item.candidates.all(), key=lambda c: c.position)]
        found[frozenset(shown)] = (item.pk, shown)
    return found


def answer(items, annotator: str, better: str, worse: str, how: str = "strict") -> dict:
    item, _ = items[frozenset({better, worse})]
    preferred = {"strict": better, "tie": "tie", "both_bad": "both_bad"}[how]
    return {"item": item, "annotator": annotator, "preferred": preferred}


@pytest.fixture
def answered(tmp_path):
    """Three passages, every pair judged by ann and ben: ann goes in a circle (d0 > d1 > d2 > d0),
    ben is consistent; they agree on two of the three pairs."""
    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", judgments_per_item=2)
    items = pair_items(study)
    rows = [
        answer(items, "ann", "d0", "d1"),
        answer(items, "ann", "d1", "d2"),
        answer(items, "ann", "d2", "d0"),
        answer(items, "ben", "d0", "d1"),
        answer(items, "ben", "d1", "d2"),
        answer(items, "ben", "d0", "d2"),
    ]
    write_jsonl(tmp_path / "answers.jsonl", rows)
    import_judgments(study, tmp_path / "answers.jsonl")
    return study


def test_agreement_counts_the_pairs_both_annotators_decided_alike(answered):
    agreement = preference_study_report(answered)["agreement"]
    assert (agreement["units"], agreement["units_with_several_annotators"]) == (3, 3)
    assert agreement["agreement"] == pytest.approx(2 / 3)
    assert agreement["by_annotators"] == {"ann | ben": {"pairs": 3, "agreement": pytest.approx(2 / 3)}}
    # ann: d0>d1, d1>d2, d0<d2 from each pair's (smaller id first) side: first, first, second; ben: first x3.
    data = np.array([[0, 0, 1], [0, 0, 0]], dtype=float)
    assert agreement["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    )


def test_a_circle_of_preferences_is_one_intransitive_triple(answered):
    intransitivity = preference_study_report(answered)["intransitivity"]
    assert intransitivity == {
        "ann": {"triples": 1, "intransitive": 1, "share": 1.0},
        "ben": {"triples": 1, "intransitive": 0, "share": 0.0},
    }


@pytest.mark.parametrize(
    "answers, intransitive",
    [
        ([("d0", "d1", "tie"), ("d1", "d2", "tie"), ("d0", "d2", "tie")], 0),  # all level
        ([("d0", "d1", "tie"), ("d1", "d2", "tie"), ("d0", "d2", "strict")], 1),  # a = b = c, yet a > c
        ([("d0", "d1", "tie"), ("d0", "d2", "strict"), ("d1", "d2", "strict")], 0),  # a = b > c
        ([("d0", "d1", "tie"), ("d0", "d2", "strict"), ("d2", "d1", "strict")], 1),  # a = b, a > c > b
    ],
)
def test_ties_are_transitive_only_where_some_ranking_with_ties_explains_them(tmp_path, answers, intransitive):
    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", judgments_per_item=1)
    items = pair_items(study)
    write_jsonl(tmp_path / "answers.jsonl", [answer(items, "ann", *entry) for entry in answers])
    import_judgments(study, tmp_path / "answers.jsonl")
    assert preference_study_report(study)["intransitivity"]["ann"]["intransitive"] == intransitive


def test_the_report_command_prints_the_human_ranking_and_compares_runs(answered):
    report = call_json_command("study_report", answered.pk, "--model-run", answered.parameters["runs"][0])
    assert report["study"]["kind"] == "preference" and report["judgments"] == 6
    assert set(report["queries"]["q0"]["ranking"]) == {"d0", "d1", "d2"}
    entry = report["models"][str(answered.parameters["runs"][0])]
    assert entry["compatibility"] is not None and entry["kendall_tau"] is not None
    out = StringIO()
    call_command("study_report", str(answered.pk), stdout=out)
    assert "Intransitive triples" in out.getvalue() and "ann" in out.getvalue()


def test_the_report_page_and_the_scores_page_show_the_ranking_and_store_it_as_a_run(client, answered):
    client.force_login(make_user("boss", staff=True))
    page = client.get(f"/studies/{answered.pk}/report/")
    assert page.status_code == 200 and b"Intransitive triples" in page.content
    run_id = answered.parameters["runs"][0]
    scores = client.get(f"/studies/{answered.pk}/preferences/", {"runs": [run_id], "p": "0.9", "depth": "5"})
    assert scores.status_code == 200 and b"Compatibility" in scores.content and b"d0" in scores.content
    refused = client.get(f"/studies/{answered.pk}/preferences/", {"alpha": "lots"})
    assert refused.status_code == 400 and b"alpha" in refused.content
    stored = client.post(f"/studies/{answered.pk}/preferences/run/", {"name": "the humans"})
    run = Run.objects.get(name="the humans")
    assert stored.status_code == 302 and stored["Location"] == f"/runs/{run.pk}/"
    assert run.retriever.kind == Retriever.Kind.HUMAN
    assert client.get(f"/runs/{run.pk}/").status_code == 200


def test_the_scores_api_qrels_comparison_and_run_endpoints(answered):
    staff = api_client(make_user("boss", staff=True))
    scores = staff.get(f"/api/studies/{answered.pk}/preferences/", {"intervals": "20", "model": "elo"})
    assert scores.status_code == 200 and scores.json()["model"] == "elo"
    qrels = staff.get(f"/api/studies/{answered.pk}/preferences/qrels/", {"intervals": "5"})
    lines = b"".join(qrels.streaming_content).decode().splitlines()
    assert qrels.status_code == 200 and sorted(line.split()[2] for line in lines) == ["d0", "d1", "d2"]
    run_id = answered.parameters["runs"][0]
    compared = staff.get(f"/api/studies/{answered.pk}/preferences/compare/", {"runs": str(run_id), "depth": "2"})
    assert compared.status_code == 200 and compared.json()["depth"] == 2
    bad = staff.get(f"/api/studies/{answered.pk}/preferences/compare/", {"runs": "99999999999999999999999"})
    assert bad.status_code == 400 and "runs" in bad.content.decode()
    created = staff.post(f"/api/studies/{answered.pk}/preferences/run/", {"name": "api humans"}, format="json")
    assert created.status_code == 201 and created.json()["queries"] == 1
    again = staff.post(f"/api/studies/{answered.pk}/preferences/run/", {"name": "api humans"}, format="json")
    assert again.status_code == 400 and "name" in again.content.decode()
