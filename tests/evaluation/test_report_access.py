"""The report through its three doors: the study_report command, the staff page and the REST
endpoint, with who may open them."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import resolve, reverse

from evaluation.api import StudyReportAPI
from evaluation.views import StudyReportPage
from tests.evaluation.test_study_report import CONTRACT_KEYS
from tests.factories import make_collection, make_run, make_user


def run_command(*args):
    out = StringIO()
    call_command("study_report", *[str(arg) for arg in args], stdout=out)
    return out.getvalue()


class TestCommand:
    def test_json_output_carries_the_contract_keys(self, hand_worked):
        output = run_command(
            hand_worked.study.pk, "--model-run", hand_worked.dense.pk, "--model-run", hand_worked.bm25.pk, "--json"
        )
        report = json.loads(output.strip().splitlines()[-1])
        assert report.keys() >= CONTRACT_KEYS
        assert report["model_accuracy"] == {
            str(hand_worked.dense.pk): pytest.approx(0.6),
            str(hand_worked.bm25.pk): None,
        }
        assert report["annotator_accuracy"]["ann1"] == pytest.approx(4 / 6)

    def test_without_json_it_prints_readable_tables(self, hand_worked):
        output = run_command(hand_worked.study.pk, "--model-run", hand_worked.dense.pk, hand_worked.bm25.pk)
        assert "Fleiss kappa" in output
        assert "Majority chose the gold" in output and "60.0%" in output
        assert "not comparable: supplied the negatives" in output
        assert f"Items where all annotators chose the gold and run {hand_worked.dense.pk} did not" in output
        assert not output.lstrip().startswith("{")

    def test_unknown_study_or_foreign_run_is_a_one_line_error(self, hand_worked):
        with pytest.raises(CommandError, match="field 'study': no study with id 999999"):
            run_command(999999)
        foreign = make_run(make_collection())
        with pytest.raises(CommandError, match="field 'model_run'"):
            run_command(hand_worked.study.pk, "--model-run", foreign.pk)


@pytest.fixture
def staff(db):
    return make_user("staffer", staff=True)


@pytest.fixture
def annotator(db):
    return make_user("annotator")


def test_report_urls_resolve_to_the_evaluation_views():
    assert resolve("/studies/1/report/").func.view_class is StudyReportPage
    assert resolve("/api/studies/1/report/").func.view_class is StudyReportAPI


class TestPage:
    def url(self, study, query=""):
        return reverse("evaluation:study-report", args=[study.pk]) + query

    def test_staff_see_tables_and_an_inline_svg_chart(self, client, staff, hand_worked):
        client.force_login(staff)
        response = client.get(self.url(hand_worked.study, f"?model_run={hand_worked.dense.pk}"))
        assert response.status_code == 200
        html = response.content.decode()
        assert "<svg" in html and "Humans (majority)" in html and "Random" in html
        assert 'class="error-bar"' in html
        assert "Fleiss kappa" in html and "ann1" in html
        assert "<script" not in html

    def test_annotators_are_forbidden(self, client, annotator, hand_worked):
        client.force_login(annotator)
        assert client.get(self.url(hand_worked.study)).status_code == 403

    def test_anonymous_visitors_are_sent_to_log_in(self, client, hand_worked):
        response = client.get(self.url(hand_worked.study))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))

    def test_a_bad_run_is_shown_as_an_error(self, client, staff, hand_worked):
        client.force_login(staff)
        response = client.get(self.url(hand_worked.study, "?model_run=999999"))
        assert response.status_code == 400
        assert "no run with id 999999" in response.content.decode()


class TestAPI:
    def url(self, study, query=""):
        return reverse("evaluation:api-study-report", args=[study.pk]) + query

    def test_staff_get_the_report_as_json(self, client, staff, hand_worked):
        client.force_login(staff)
        runs = f"?model_run={hand_worked.dense.pk},{hand_worked.bm25.pk}"
        response = client.get(self.url(hand_worked.study, runs))
        assert response.status_code == 200
        report = response.json()
        assert report.keys() >= CONTRACT_KEYS
        assert set(report["model_accuracy"]) == {str(hand_worked.dense.pk), str(hand_worked.bm25.pk)}

    def test_annotators_are_forbidden(self, client, annotator, hand_worked):
        client.force_login(annotator)
        assert client.get(self.url(hand_worked.study)).status_code == 403

    def test_anonymous_requests_are_refused(self, client, hand_worked):
        assert client.get(self.url(hand_worked.study)).status_code in {401, 403}

    def test_bad_input_is_a_400_naming_the_field(self, client, staff, hand_worked):
        client.force_login(staff)
        response = client.get(self.url(hand_worked.study, "?model_run=abc"))
        assert response.status_code == 400
        assert "model_run" in response.json()

    def test_unknown_study_is_404(self, client, staff):
        client.force_login(staff)
        assert client.get("/api/studies/999999/report/").status_code == 404
