"""The crowd quota is the crowd link's own setting, separate from the study's per-annotator cap
(issue 21, point 1). The findings as written: a quota of 4 capped the lab annotators at 4;
`crowd_link STUDY --quota 10` on a study where people had done 29 gave "29 / 10 Finished" and
"You judged all 10 items"; with 3 judgments per item and a cap of 4, a 12-item study could not
be finished by its annotators. And neither limit can be set below what someone has already judged
without a clear answer: refused with the numbers, or set when staff confirm."""

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.models import Item, Study
from annotation.selectors import annotator_progress
from annotation.services import claim_next_item, next_work, submit_judgment
from integrations.models import CrowdLink, Participant
from integrations.services.crowd import configure_crowd_link
from tests.factories import api_client, call_json_command, make_annotator, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


def judge(study, annotator, at_most: int | None = None) -> int:
    judged = 0
    while (at_most is None or judged < at_most) and (assignment := claim_next_item(study, annotator)) is not None:
        submit_judgment(annotator=annotator, item=assignment.item, position=0)
        judged += 1
    return judged


def participant_user(link, pid: str):
    Client().get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": pid, "SESSION_ID": f"s-{pid}"})
    return Participant.objects.get(link=link, external_id=pid).user


def test_a_crowd_quota_of_4_does_not_cap_lab_annotators():
    study = make_relic_proxy_study(10, judgments_per_item=2)
    link = configure_crowd_link(study, completion_code="C", quota=4)
    lab = make_annotator("lab")
    assert judge(study, lab) == 10
    assert annotator_progress(study, lab) == {"done": 10, "total": 10}
    crowd = participant_user(link, "P1")
    assert judge(study, crowd) == 4
    assert next_work(study, crowd)["progress"] == {"done": 4, "total": 4}
    assert Study.objects.get(pk=study.pk).max_items_per_annotator is None


def test_crowd_link_quota_10_where_someone_has_done_29_never_reads_29_of_10(client):
    study = make_relic_proxy_study(30, judgments_per_item=2)
    lab = make_annotator("lab")
    assert judge(study, lab, at_most=29) == 29

    summary = call_json_command("crowd_link", study.pk, "--quota", "10")

    assert summary["quota"] == 10 and summary["participants"] == {}
    client.force_login(lab)
    page = client.get(f"/annotate/{study.pk}/").content.decode()
    assert "29 / 30" in page and "29 / 10" not in page and "You judged all 10 items" not in page
    assert annotator_progress(study, lab) == {"done": 29, "total": 30}
    crowd = participant_user(CrowdLink.objects.get(study=study), "P1")
    assert next_work(study, crowd)["progress"] == {"done": 0, "total": 10}


def test_three_judgments_per_item_and_a_crowd_quota_of_4_leave_a_12_item_study_finishable():
    study = make_relic_proxy_study(12, judgments_per_item=3)
    configure_crowd_link(study, completion_code="C", quota=4)
    for name in ("lab1", "lab2", "lab3"):
        assert judge(study, make_annotator(name)) == 12
    complete = Item.objects.filter(study=study, assignments__state="submitted").distinct().count()
    assert complete == 12


def test_the_study_cap_and_the_quota_are_set_apart_and_the_smaller_stops_a_participant():
    study = make_relic_proxy_study(8, judgments_per_item=2)
    staff = api_client(make_user(staff=True))
    link = staff.put(f"/api/studies/{study.pk}/crowd-link/", {"quota": 5}, format="json").json()
    assert link["quota"] == 5
    recruiting = staff.patch(f"/api/studies/{study.pk}/recruiting/", {"max_items_per_annotator": 2}, format="json")
    assert recruiting.json()["max_items_per_annotator"] == 2
    assert staff.get(f"/api/studies/{study.pk}/crowd-link/").json()["quota"] == 5
    crowd = participant_user(CrowdLink.objects.get(study=study), "P1")
    study.refresh_from_db()
    assert judge(study, crowd) == 2  # the cap is lower and applies to everyone
    assert next_work(study, crowd)["progress"] == {"done": 2, "total": 2}


def test_a_quota_below_what_a_participant_judged_is_refused_with_the_numbers_or_confirmed():
    study = make_relic_proxy_study(6, judgments_per_item=2)
    link = configure_crowd_link(study, completion_code="C", quota=5)
    crowd = participant_user(link, "P1")
    judge(study, crowd, at_most=3)

    with pytest.raises(CommandError) as refused:
        call_command("crowd_link", study.pk, "--quota", "2")
    message = str(refused.value)
    assert "'quota'" in message and f"{crowd.username} 3" in message and "at least 3" in message
    assert "\n" not in message
    assert CrowdLink.objects.get(pk=link.pk).quota == 5

    confirmed = call_json_command("crowd_link", study.pk, "--quota", "2", "--confirm-below-done")
    assert confirmed["quota"] == 2
    assert next_work(study, crowd)["progress"] == {"done": 3, "total": 3}  # finished, not "3 / 2"
    assert judge(study, crowd) == 0


def test_a_cap_below_what_an_annotator_judged_is_refused_with_the_numbers_or_confirmed(staff_client):
    study = make_relic_proxy_study(6, judgments_per_item=2)
    lab = make_annotator("lab")
    judge(study, lab, at_most=3)
    api = api_client(make_user(staff=True))
    url = f"/api/studies/{study.pk}/recruiting/"

    refused = api.patch(url, {"max_items_per_annotator": 2}, format="json")
    assert refused.status_code == 400
    [line] = refused.json()["max_items_per_annotator"]
    assert "lab 3" in line and "at least 3" in line
    assert Study.objects.get(pk=study.pk).max_items_per_annotator is None
    assert api.patch(url, {"max_items_per_annotator": 3}, format="json").status_code == 200

    form = f"/studies/{study.pk}/recruiting/annotators/"
    page = staff_client.post(form, {"max_items_per_annotator": "1"}, follow=True)
    assert "lab 3" in page.content.decode() and Study.objects.get(pk=study.pk).max_items_per_annotator == 3
    staff_client.post(form, {"max_items_per_annotator": "1", "confirm_below_done": "on"})
    study.refresh_from_db()
    assert study.max_items_per_annotator == 1
    assert annotator_progress(study, lab) == {"done": 3, "total": 3}


def test_the_crowd_form_refuses_a_quota_below_what_a_participant_judged(staff_client):
    study = make_relic_proxy_study(4, judgments_per_item=2)
    link = configure_crowd_link(study, completion_code="C")
    crowd = participant_user(link, "P1")
    judge(study, crowd, at_most=2)
    form = {"completion_code": "C", "quota": "1", "active": "on"}
    page = staff_client.post(f"/studies/{study.pk}/recruiting/crowd/", form, follow=True).content.decode()
    assert f"{crowd.username} 2" in page and CrowdLink.objects.get(pk=link.pk).quota is None
    staff_client.post(f"/studies/{study.pk}/recruiting/crowd/", {**form, "confirm_below_done": "on"})
    assert CrowdLink.objects.get(pk=link.pk).quota == 1
