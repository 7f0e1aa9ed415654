"""Judges through REST and the staff form, and who may reach them: staff only. Annotators (the
one assigned, another one) and anonymous visitors reach no judge route, and judge answers appear
in no annotator page or payload."""

import pytest
from django.template import Context, Template
from django.test import RequestFactory

from jobs.models import Job
from judges.models import Judge, JudgeAnswer
from judges.secrets import ENDPOINT_PERMISSION, store_secret
from judges.services import register_judge
from tests.factories import api_client, grant, make_annotator, make_relic_proxy_study, make_user, next_url

pytestmark = pytest.mark.django_db

SECRET = "JUDGE-SAYS-XYZZY"


def judge_routes(study):
    return [
        ("get", "/api/judges/", None),
        ("post", "/api/judges/", {"name": "x", "backend": "local", "settings": {}}),
        ("get", f"/api/studies/{study.pk}/judge/", None),
        ("post", f"/api/studies/{study.pk}/judge/", {"judge": "", "samples": 1}),
        ("get", f"/api/studies/{study.pk}/judge-answers/", None),
    ]


def test_endpoint_managers_register_judges_by_the_name_of_a_judge_secret_and_a_key_itself_is_refused():
    staff = api_client(grant(make_user("lead", staff=True), ENDPOINT_PERMISSION))
    store_secret("openai-key", "sk-registered-not-shown-0001")
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}

    refused = staff.post(
        "/api/judges/",
        {"name": "gpt", "backend": "openai", "settings": {**endpoint, "api_key": "sk-1"}},
        format="json",
    )
    created = staff.post(
        "/api/judges/",
        {"name": "gpt", "backend": "openai", "settings": {**endpoint, "api_key_secret": "openai-key"}},
        format="json",
    )

    assert refused.status_code == 400 and "settings.api_key" in str(refused.json())
    assert created.status_code == 201
    assert created.json()["settings"]["api_key_secret"] == "openai-key" and created.json()["queue"] == "long"
    assert "sk-registered" not in created.content.decode() + staff.get("/api/judges/").content.decode()
    assert not Judge.objects.filter(settings__has_key="api_key").exists()


def test_staff_judge_a_study_by_rest_and_read_the_results_and_answers(eager_celery, django_capture_on_commit_callbacks):
    study = make_relic_proxy_study(2)
    register_judge("bm25-run", "run", {"run": study.negatives_run_id})
    staff = api_client(make_user("lead", staff=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"/api/studies/{study.pk}/judge/", {"judge": "bm25-run"}, format="json")

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["job"]["id"])
    assert (job.kind, job.queue, job.status) == ("judge", "long", "succeeded")
    [result] = staff.get(f"/api/studies/{study.pk}/judge/").json()
    assert (result["judge"], result["answered"] + result["failed"]) == ("bm25-run", 2)
    answers = staff.get(f"/api/studies/{study.pk}/judge-answers/", {"judge": "bm25-run"}).json()
    assert [row["item"] for row in answers] == list(study.items.order_by("position").values_list("pk", flat=True))


def test_unknown_judges_and_bad_samples_are_400s_naming_the_field():
    study = make_relic_proxy_study(1)
    staff = api_client(make_user("lead", staff=True))

    unknown = staff.post(f"/api/studies/{study.pk}/judge/", {"judge": "nobody"}, format="json")
    too_many = staff.post(f"/api/studies/{study.pk}/judge/", {"samples": 99}, format="json")

    assert unknown.status_code == 400 and "judge" in str(unknown.json())
    assert too_many.status_code == 400 and "samples" in too_many.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("who", ["annotator", "other_annotator", "anonymous"])
def test_no_one_but_staff_reaches_a_judge_route(who, client):
    study = make_relic_proxy_study(1)
    users = {"annotator": make_annotator("ann"), "other_annotator": make_annotator("other"), "anonymous": None}
    rest = api_client(users[who])

    for method, url, data in judge_routes(study):
        response = getattr(rest, method)(url, data, format="json") if data else getattr(rest, method)(url)
        assert response.status_code in (401, 403), (method, url)
    if users[who]:
        client.force_login(users[who])
    page = client.post(f"/studies/{study.pk}/judges/run/", {"judge": ""})
    assert page.status_code in (302, 403) and not Job.objects.exists()
    if page.status_code == 302:
        assert "/accounts/login/" in page["Location"]


def test_annotators_never_see_what_a_judge_answered(client):
    study = make_relic_proxy_study(1)
    judge = register_judge("oracle-judge-name", "run", {"run": study.negatives_run_id})
    item = study.items.get()
    JudgeAnswer.objects.create(judge=judge, item=item, prompt_hash="h", raw_response=SECRET, parsed={"position": 0})
    annotator = make_annotator("ann")
    client.force_login(annotator)

    payload = api_client(annotator).get(next_url(study))
    page = client.get(f"/annotate/{study.pk}/")
    home = client.get("/")

    assert payload.status_code == 200 and payload.json()["item"] == item.pk
    for response in (payload, page, home):
        assert SECRET not in response.content.decode()
        assert "oracle-judge-name" not in response.content.decode()


def test_the_study_judges_partial_offers_the_judges_and_lists_their_results(staff_client):
    study = make_relic_proxy_study(2)
    judge = register_judge("bm25-run", "run", {"run": study.negatives_run_id})
    for item in study.items.all():
        JudgeAnswer.objects.create(judge=judge, item=item, prompt_hash=f"h{item.pk}", parsed={"position": 1})
    request = RequestFactory().get(f"/studies/{study.pk}/")

    html = Template("{% load judges_tags %}{% study_judges study %}").render(
        Context({"study": study, "request": request})
    )

    assert f'action="/studies/{study.pk}/judges/run/"' in html
    assert '<option value="bm25-run"' in html and "smollm2-135m-local" in html
    assert "<td>bm25-run</td><td>1</td><td>run</td><td>2</td><td>1</td><td>2</td><td>0</td>" in " ".join(
        html.split()
    ).replace("> <", "><")
    response = staff_client.post(f"/studies/{study.pk}/judges/run/", {"judge": "bm25-run", "next": "/studies/"})
    assert response.status_code == 302 and response["Location"] == "/studies/"
    assert Job.objects.get().parameters == {"study": study.pk, "judge": "bm25-run", "version": 1, "samples": 1}
