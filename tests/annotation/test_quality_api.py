"""Quality control over REST and the `study_quality` command: who may call what, and the staff
and reviewer flows end to end."""

import io

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Adjudication, AnnotatorFlag, Item, PeerReview, StudyBlock
from annotation.services.quality import disagreement_items
from tests.factories import (
    add_judgment,
    api_client,
    call_json_command,
    make_annotator,
    make_bulk_proxy_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    """A proxy study of six items judged by three annotators: `fast` always picks position 0
    in a second, the others pick the gold in twenty."""
    study = make_relic_proxy_study(6, judgments_per_item=3)
    study.peer_review_rate = 0.5
    study.save()
    people = [make_annotator("alice"), make_annotator("bob"), make_annotator("fast")]
    for item in study.items.all():
        gold = item.candidates.get(is_gold=True).position
        for person in people:
            judgment = add_judgment(item, person, position=0 if person.username == "fast" else gold)
            type(judgment).objects.filter(pk=judgment.pk).update(seconds=1 if person.username == "fast" else 20)
    return study


STAFF_ENDPOINTS = [
    ("get", "/api/studies/{study}/quality/"),
    ("get", "/api/studies/{study}/flags/"),
    ("post", "/api/studies/{study}/flags/"),
    ("post", "/api/flags/{flag}/resolve/"),
    ("get", "/api/studies/{study}/blocks/"),
    ("post", "/api/studies/{study}/blocks/"),
    ("delete", "/api/studies/{study}/blocks/alice/"),
    ("get", "/api/studies/{study}/disagreements/"),
    ("post", "/api/items/{item}/adjudicate/"),
    ("post", "/api/studies/{study}/peer-reviews/sample/"),
    ("post", "/api/studies/{study}/designate/"),
]


@pytest.mark.parametrize(("method", "url"), STAFF_ENDPOINTS)
def test_staff_endpoints_refuse_annotators_and_anonymous_callers(study, method, url):
    flag = AnnotatorFlag.objects.create(
        study=study, annotator=make_annotator(), reason="too_fast", value=1, threshold=2
    )
    url = url.format(study=study.pk, flag=flag.pk, item=study.items.first().pk)
    assert getattr(api_client(make_annotator()), method)(url, {}, format="json").status_code == 403
    assert getattr(api_client(), method)(url, {}, format="json").status_code in (401, 403)
    assert not StudyBlock.objects.exists() and not Adjudication.objects.exists() and not PeerReview.objects.exists()


def test_staff_refresh_flags_and_resolve_one(study):
    staff = api_client(make_user(staff=True))
    refreshed = staff.post(f"/api/studies/{study.pk}/flags/").json()
    assert refreshed["created"] == 1
    [flag] = refreshed["flags"]
    assert (flag["annotator"], flag["reason"]) == ("fast", "too_fast")
    assert staff.post(f"/api/flags/{flag['id']}/resolve/").json()["resolved_at"] is not None
    assert staff.get(f"/api/studies/{study.pk}/flags/").json()["flags"] == []
    assert len(staff.get(f"/api/studies/{study.pk}/flags/?all=1").json()["flags"]) == 1


def test_staff_block_and_unblock_over_rest(study):
    staff = api_client(make_user("lead", staff=True))
    response = staff.post(
        f"/api/studies/{study.pk}/blocks/", {"annotator": "fast", "reason": "random answers"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["exclude_judgments"] is True and response.json()["created_by"] == "lead"
    fast = StudyBlock.objects.get().annotator
    assert api_client(fast).get(f"/api/annotate/{study.pk}/next/").status_code == 403
    overview = staff.get(f"/api/studies/{study.pk}/quality/").json()
    assert overview["annotators"]["fast"]["blocked"] is True
    assert overview["annotators"]["fast"]["counted_judgments"] == 0
    assert overview["annotators"]["alice"]["counted_judgments"] == 6
    assert staff.delete(f"/api/studies/{study.pk}/blocks/fast/").status_code == 204
    assert staff.delete(f"/api/studies/{study.pk}/blocks/fast/").status_code == 404


def test_blocking_refuses_unknown_users_and_missing_reasons(study):
    staff = api_client(make_user(staff=True))
    unknown = staff.post(f"/api/studies/{study.pk}/blocks/", {"annotator": "nobody", "reason": "x"}, format="json")
    assert unknown.status_code == 400 and "annotator" in unknown.json()
    blank = staff.post(f"/api/studies/{study.pk}/blocks/", {"annotator": "fast", "reason": "  "}, format="json")
    assert blank.status_code == 400 and "reason" in blank.json()
    assert not StudyBlock.objects.exists()


def test_staff_list_disagreements_and_adjudicate(study):
    staff = api_client(make_user("judge", staff=True))
    listed = staff.get(f"/api/studies/{study.pk}/disagreements/").json()
    rows = listed["results"]
    assert listed["count"] == len(rows) and listed["next"] is None
    disputed = [row for row in rows if row["gold_position"] != 0]
    assert disputed
    item = disputed[0]["item"]
    decided = staff.post(
        f"/api/items/{item}/adjudicate/", {"position": disputed[0]["gold_position"], "note": "gold"}, format="json"
    )
    assert decided.status_code == 200
    assert decided.json()["decided_by"] == "judge" and decided.json()["position"] == disputed[0]["gold_position"]
    wrong = staff.post(f"/api/items/{item}/adjudicate/", {"position": 17}, format="json")
    assert wrong.status_code == 400 and "position" in wrong.json()


def test_disagreements_come_a_hundred_a_page_in_study_order():
    study = make_bulk_proxy_study(300)
    everything = disagreement_items(study)
    assert len(everything) > 100
    staff = api_client(make_user(staff=True))

    first = staff.get(f"/api/studies/{study.pk}/disagreements/").json()
    second = staff.get(first["next"]).json()

    assert first["count"] == second["count"] == len(everything) and len(first["results"]) == 100
    assert first["results"] + second["results"] == everything[:200]
    assert staff.get(f"/api/studies/{study.pk}/disagreements/?page=99").status_code == 404
    assert api_client(make_annotator()).get(first["next"]).status_code == 403


def test_peer_review_from_sampling_to_verdict(study):
    staff = api_client(make_user(staff=True))
    assert (
        staff.post(f"/api/studies/{study.pk}/peer-reviews/sample/", {"seed": 1}, format="json").json()["assigned"] == 9
    )
    review = PeerReview.objects.select_related("reviewer", "judgment__annotator").first()
    reviewer = api_client(review.reviewer)
    served = reviewer.get(f"/api/annotate/{study.pk}/peer-review/next/").json()
    assert served["finished"] is False and "answer" in served
    assert review.judgment.annotator.username not in str(served)
    mine = PeerReview.objects.filter(reviewer=review.reviewer).get(pk=served["review"])
    verdict = reviewer.post(f"/api/peer-reviews/{mine.pk}/", {"verdict": "pass"}, format="json")
    assert verdict.status_code == 201 and verdict.json()["verdict"] == "pass"
    assert reviewer.post(f"/api/peer-reviews/{mine.pk}/", {"verdict": "fail"}, format="json").status_code == 200
    someone_else = api_client(mine.judgment.annotator)
    assert someone_else.post(f"/api/peer-reviews/{mine.pk}/", {"verdict": "fail"}, format="json").status_code == 403
    assert reviewer.post("/api/peer-reviews/999999/", {"verdict": "fail"}, format="json").status_code == 404
    assert PeerReview.objects.get(pk=mine.pk).verdict == "pass"


def test_staff_designate_gold_items_over_rest():
    study = make_relic_proxy_study(5)
    staff = api_client(make_user(staff=True))
    response = staff.post(f"/api/studies/{study.pk}/designate/", {"role": "gold", "count": 2}, format="json")
    assert response.status_code == 200
    assert set(response.json()["items"]) == set(study.items.filter(role=Item.Role.GOLD).values_list("pk", flat=True))
    too_many = staff.post(f"/api/studies/{study.pk}/designate/", {"role": "qualification", "count": 9}, format="json")
    assert too_many.status_code == 400 and "count" in too_many.json()


# --- the command -------------------------------------------------------------------------------


def test_study_quality_command_refreshes_blocks_samples_and_reports(study):
    summary = call_json_command(
        "study_quality",
        study.pk,
        "--refresh-flags",
        "--block",
        "fast",
        "--reason",
        "random answers",
        "--sample-peer-review",
        "--seed",
        "2",
    )
    assert summary["flags"]["created"] == 1
    assert summary["blocked"] == {"annotator": "fast", "exclude_judgments": True}
    # the block (taken before sampling) leaves fast's judgments unsampled and fast no reviewer
    assert summary["peer_review_sample"] == {"assigned": 6, "unassigned": 0, "reviews": 6}
    fast = summary["annotators"]["fast"]
    assert fast["blocked"] is True and fast["open_flags"] == []  # blocking resolved the flag
    assert summary["annotators"]["alice"]["median_seconds"] == 20
    assert summary["study_median_seconds"] == 20


def test_study_quality_command_refuses_bad_input_and_writes_nothing(study):
    with pytest.raises(CommandError, match="field 'reason'"):
        call_command("study_quality", str(study.pk), "--block", "fast")
    with pytest.raises(CommandError, match="field 'unblock': no user named 'ghost'"):
        call_command("study_quality", str(study.pk), "--refresh-flags", "--unblock", "ghost")
    with pytest.raises(CommandError, match="field 'designate'"):
        call_command("study_quality", str(study.pk), "--designate", "gold")
    with pytest.raises(CommandError, match="field 'study_id'"):
        call_command("study_quality", "999999")
    assert not AnnotatorFlag.objects.exists() and not StudyBlock.objects.exists()


def test_study_quality_command_prints_a_readable_table_without_json(study):
    out = io.StringIO()
    call_command("study_quality", str(study.pk), "--refresh-flags", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"study {study.pk} (proxy)")
    assert any(line.strip().startswith("fast: 6 counted") and "flags: too_fast" in line for line in lines)
