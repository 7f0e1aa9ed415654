"""A large study's report is computed by a worker job, not in the request: the API answers 202
with the job, the page says the report is on its way, one job serves repeated asks, and once the
job has run the cached report is served at once. Staff only, like every report."""

import pytest

from evaluation.services import study_report
from evaluation.tasks import compute_study_report
from jobs.models import Job
from tests.factories import api_client, make_annotator, make_bulk_proxy_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def large_study(settings):
    settings.MARGINALIA_REPORT_JOB_ITEMS = 5
    return make_bulk_proxy_study(6, seed=4)


def report_url(study) -> str:
    return f"/api/studies/{study.pk}/report/"


def test_the_api_answers_with_one_job_until_the_report_is_ready(large_study):
    staff = api_client(make_user(staff=True))

    first, again = staff.get(report_url(large_study)), staff.get(report_url(large_study))

    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    job = Job.objects.get(pk=first.json()["id"])
    assert (job.kind, job.queue, job.status) == ("report", "cpu", Job.Status.PENDING)

    compute_study_report(job.pk, large_study.pk, [])  # what the cpu worker runs

    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.progress == 1.0
    ready = staff.get(report_url(large_study))
    assert ready.status_code == 200
    expected = study_report(large_study)
    assert ready.json()["items"] == 6
    assert ready.json()["fleiss_kappa"] == expected["fleiss_kappa"]
    assert Job.objects.filter(kind="report").count() == 1


def test_the_page_says_the_report_is_being_computed(large_study):
    staff = make_user(staff=True)
    client = api_client(staff)
    client.force_login(staff)

    page = client.get(f"/studies/{large_study.pk}/report/").content.decode()

    job = Job.objects.get(kind="report")
    assert f'data-job="{job.pk}"' in page and "being computed" in page


def test_annotators_and_anonymous_visitors_start_no_report_job(large_study):
    assert api_client(make_annotator()).get(report_url(large_study)).status_code == 403
    assert api_client().get(report_url(large_study)).status_code in (401, 403)
    assert not Job.objects.filter(kind="report").exists()


def test_without_a_task_queue_the_page_of_a_large_study_says_so_instead_of_failing(large_study, broker_down):
    staff = make_user(staff=True)
    client = api_client(staff)
    client.force_login(staff)

    response = client.get(f"/studies/{large_study.pk}/report/")

    page = response.content.decode()
    assert response.status_code == 503 and 'role="alert"' in page
    assert "task queue cannot be reached" in page and "Start Redis and a worker" in page
    assert f"Study report: {large_study.name}" in page  # the page itself, with its navigation
    assert not Job.objects.exists()
    assert client.get(report_url(large_study)).status_code == 503  # as the API says
