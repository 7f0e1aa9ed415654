"""The label study report through its doors: the staff page (tables and inline SVG charts), the
REST endpoint and the study_report command, and who may open them."""

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.factories import add_hits, add_label_judgment, make_label_study, make_run, make_user

ROWS = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 1]]


@pytest.fixture
def quotability(db):
    study = make_label_study(kind="quotability", items=len(ROWS), parameters={"runs": [3], "selection": "top_non_gold"})
    annotators = [make_user(name) for name in ("ann1", "ann2", "ann3")]
    for item, row in zip(study.items.order_by("position"), ROWS):
        for annotator, label in zip(annotators, row):
            add_label_judgment(item, annotator, label, seconds=12.0)
    return study


def test_staff_see_the_kind_specific_tables_and_inline_svg_charts(staff_client, quotability):
    run = make_run(quotability.collection, kind="dense")
    for number, item in enumerate(quotability.items.order_by("position")):
        add_hits(run, item.query, [(item.candidates.get().passage, float(number))])
    response = staff_client.get(reverse("evaluation:study-report", args=[quotability.pk]) + f"?model_run={run.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count("<svg") == 2
    assert "Share of labels given" in html and "agreement with the majority" in html
    assert "Krippendorff alpha (nominal)" in html and "Fleiss kappa" in html
    assert "Run 3&#x27;s top non-gold paragraphs judged quotable by majority vote: 75.0%" in html
    assert "ann1" in html and "Spearman" in html
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_relevance_pages_link_the_qrels_export(staff_client, db):
    study = make_label_study(items=1, label_schema={"scale": "graded-0-2"})
    html = staff_client.get(reverse("evaluation:study-report", args=[study.pk])).content.decode()
    assert reverse("evaluation:api-study-qrels", args=[study.pk]) in html


def test_annotators_are_forbidden_on_page_and_api(client, quotability):
    client.force_login(make_user("annotator"))
    assert client.get(reverse("evaluation:study-report", args=[quotability.pk])).status_code == 403
    assert client.get(reverse("evaluation:api-study-report", args=[quotability.pk])).status_code == 403


def test_the_api_returns_the_kinds_report(staff_client, quotability):
    report = staff_client.get(reverse("evaluation:api-study-report", args=[quotability.pk])).json()
    assert report["study"]["kind"] == "quotability"
    assert report["quotable_share"]["share"] == pytest.approx(0.75)
    assert set(report["agreement"]) == {"krippendorff_alpha", "fleiss_kappa", "cohen_kappa"}


def test_the_command_prints_json_or_tables(quotability):
    out = io.StringIO()
    call_command("study_report", str(quotability.pk), "--json", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["items"] == 4 and report["judgments"] == 12
    out = io.StringIO()
    call_command("study_report", str(quotability.pk), stdout=out)
    text = out.getvalue()
    assert "Krippendorff alpha (nominal)" in text and "Aggregated labels" in text and "ann2" in text
    assert "judged quotable by majority vote: 75.0% (3 of 4 items)" in text


def test_pilot_and_rubric_studies_render_their_own_rows(staff_client, db):
    pilot = make_label_study(kind="quotability", items=1, candidates=3, label_schema={"multi_select": True})
    rubric = make_label_study(
        items=1, label_schema={"spans": "passage", "rubric": [{"name": "quality", "values": [0, 1, 2]}]}
    )
    first, second = make_user("first"), make_user("second")
    for annotator, selections in ((first, [0, 2]), (second, [2])):
        add_label_judgment(pilot.items.get(), annotator, selections=selections)
    for annotator, quality in ((first, 2), (second, 1)):
        add_label_judgment(
            rubric.items.get(),
            annotator,
            1,
            spans=[{"target": "passage", "start": 0, "end": 7}],
            rubric={"quality": quality},
        )
    pilot_html = staff_client.get(reverse("evaluation:study-report", args=[pilot.pk])).content.decode()
    assert "Selections: mean pairwise Jaccard" in pilot_html and "(paragraph 3)" in pilot_html
    rubric_html = staff_client.get(reverse("evaluation:study-report", args=[rubric.pk])).content.decode()
    assert "Span token F1" in rubric_html and "Rubric quality: Krippendorff alpha (ordinal)" in rubric_html
