"""Annotators going back to earlier answers where the study allows it
(annotation.services.revisions): each revision keeps the answer it replaces (who, when), the
judgment holds the latest, exports and reports read the latest and say so, and the undo and
peer-review rules stay consistent (an answer someone else has seen is final; a revised answer
cannot be taken back). Through the service, the annotator's pages and REST."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.exports import judgment_export
from annotation.models import Judgment, JudgmentRevision, PeerReview, Study
from annotation.presentation import annotator_order
from annotation.services import AnnotationForbidden, SubmissionRejected, claim_next_item, submit_judgment
from annotation.services.annotator_actions import undo_last_submission
from annotation.services.quality import adjudicate, block_annotator, sample_for_peer_review
from annotation.services.revisions import RevisionRefused, revise_judgment
from evaluation.reports import cached_study_report
from tests.annotation.test_attacks import session_client
from tests.factories import (
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_study,
    make_preference_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db

SCHEMA = {"rationale": "optional", "spans": "passage"}


def label_study(**settings) -> Study:
    return make_label_study(items=2, label_schema=SCHEMA, allow_revisions=True, **settings)


def answered(study: Study, annotator, **answer) -> Judgment:
    """The annotator's web answer to their next item."""
    item = claim_next_item(study, annotator).item
    return submit_judgment(annotator=annotator, item=item, **answer).judgment


def test_a_revision_keeps_the_earlier_answer_and_the_judgment_holds_the_latest():
    study, ada = label_study(), make_annotator("ada")
    first = answered(study, ada, label=1, rationale="Same plot.", spans=[{"start": 0, "end": 4}])
    revised = revise_judgment(first, ada, label=0, rationale="Only the setting matches.").judgment
    assert (revised.pk, revised.label, revised.rationale, revised.spans, revised.revision) == (
        first.pk,
        0,
        "Only the setting matches.",
        [],
        2,
    )
    assert revised.revised_at >= first.submitted_at and revised.submitted_at == first.submitted_at
    kept = JudgmentRevision.objects.get()
    assert (kept.number, kept.label, kept.rationale, kept.replaced_by) == (1, 1, "Same plot.", ada)
    assert kept.spans == [{"target": "passage", "start": 0, "end": 4}] and kept.answered_at == first.submitted_at
    again = revise_judgment(revised, ada, label=1, unsure=True).judgment
    assert again.revision == 3 and again.unsure is True
    second = JudgmentRevision.objects.get(number=2)
    assert (second.label, second.answered_at) == (0, revised.revised_at)
    assert Judgment.objects.count() == 1  # revising never adds a judgment


def test_the_same_answer_again_records_nothing():
    study, ada = label_study(), make_annotator()
    first = answered(study, ada, label=1)
    assert revise_judgment(first, ada, label=1).created is False
    assert not JudgmentRevision.objects.exists() and Judgment.objects.get().revision == 1


def test_a_malformed_revision_is_refused_naming_the_field_and_changes_nothing():
    study, ada = label_study(), make_annotator()
    first = answered(study, ada, label=1)
    for answer in ({"label": 7}, {"label": 1, "spans": [{"start": 0, "end": 10_000}]}, {"position": 0}):
        with pytest.raises(SubmissionRejected, match="field"):
            revise_judgment(first, ada, **answer)
    assert not JudgmentRevision.objects.exists() and Judgment.objects.get().label == 1


def test_revisions_are_off_by_default_and_only_for_open_studies_and_web_answers():
    closed_later, ada = label_study(), make_annotator()
    judgment = answered(closed_later, ada, label=1)
    Study.objects.filter(pk=closed_later.pk).update(allow_revisions=False)
    judgment.refresh_from_db()
    with pytest.raises(AnnotationForbidden, match="does not let annotators revise"):
        revise_judgment(judgment, ada, label=0)
    Study.objects.filter(pk=closed_later.pk).update(allow_revisions=True, status=Study.Status.CLOSED)
    judgment.refresh_from_db()
    with pytest.raises(RevisionRefused, match="closed"):
        revise_judgment(judgment, ada, label=0)
    default = make_label_study(items=1)
    assert default.allow_revisions is False
    study = label_study()
    file_answer = add_label_judgment(study.items.first(), ada, 1)
    with pytest.raises(RevisionRefused, match="imported"):
        revise_judgment(file_answer, ada, label=0)
    assert not JudgmentRevision.objects.exists()


@pytest.mark.parametrize("seen_by", ["peer_review", "void", "adjudication"])
def test_an_answer_someone_else_has_seen_is_final(seen_by):
    study, ada, staff = label_study(), make_annotator("ada"), make_user(staff=True)
    judgment = answered(study, ada, label=1)
    if seen_by == "peer_review":
        PeerReview.objects.create(judgment=judgment, reviewer=make_annotator())
    elif seen_by == "void":
        Judgment.objects.filter(pk=judgment.pk).update(voided=True, void_reason="spam")
    else:
        adjudicate(judgment.item, by=staff, label=0)
    judgment.refresh_from_db()
    with pytest.raises(RevisionRefused, match="someone else has already seen this answer"):
        revise_judgment(judgment, ada, label=0)
    assert Judgment.objects.get().label == 1


def test_a_revised_answer_can_no_longer_be_taken_back_with_undo():
    study, ada = label_study(), make_annotator()
    judgment = answered(study, ada, label=1)
    revise_judgment(judgment, ada, label=0)
    with pytest.raises(SubmissionRejected, match="you revised this answer"):
        undo_last_submission(study, ada)
    assert Judgment.objects.get().label == 0 and JudgmentRevision.objects.count() == 1


def test_a_peer_reviewer_drawn_after_a_revision_reviews_the_latest_answer():
    study = make_label_study(items=1, judgments_per_item=2, allow_revisions=True, peer_review_rate=1.0)
    ada, ben = make_annotator("ada"), make_annotator("ben")
    first = answered(study, ada, label=1)
    answered(study, ben, label=1)
    revise_judgment(first, ada, label=0)
    sample_for_peer_review(study, seed=1)
    review = PeerReview.objects.get(judgment=first)
    payload = api_client(review.reviewer).get(f"/api/annotate/{study.pk}/peer-review/next/").json()
    assert payload["answer"]["label"] == 0


def test_only_the_annotators_own_answers_may_be_revised():
    study, ada, eve = label_study(), make_annotator("ada"), make_annotator("eve")
    judgment = answered(study, ada, label=1)
    with pytest.raises(AnnotationForbidden):
        revise_judgment(judgment, eve, label=0)
    block_annotator(study, ada, by=None, reason="spam")
    with pytest.raises(AnnotationForbidden, match="blocked"):
        revise_judgment(judgment, ada, label=0)
    assert not JudgmentRevision.objects.exists()


def test_exports_carry_the_latest_answer_with_its_revision_number():
    study, ada = label_study(), make_annotator("ada")
    judgment = answered(study, ada, label=1, rationale="first")
    revised = revise_judgment(judgment, ada, label=0, rationale="second").judgment
    (row,) = [json.loads(line) for line in "".join(judgment_export(study, "jsonl")).splitlines()]
    assert (row["label"], row["rationale"], row["revision"]) == (0, "second", 2)
    assert row["revised_at"] == revised.revised_at.isoformat()
    header = "".join(judgment_export(study, "csv")).splitlines()[0]
    assert ",shown_order,revision,revised_at,item_label," in header  # the label's provenance follows them


def test_reports_read_the_latest_revision_say_so_and_are_recomputed_after_one():
    study = make_relic_proxy_study(2, judgments_per_item=1)
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    study.refresh_from_db()
    ada = make_annotator("ada")
    item = claim_next_item(study, ada).item
    gold = item.candidates.get(is_gold=True).position
    judgment = submit_judgment(annotator=ada, item=item, position=(gold + 1) % 3).judgment
    before = cached_study_report(study)
    assert before["annotator_accuracy"]["ada"] == 0.0
    assert before["revisions"]["revised_judgments"] == 0
    revise_judgment(judgment, ada, position=gold)
    after = cached_study_report(study)  # a revision changes the report's fingerprint
    assert after["annotator_accuracy"]["ada"] == 1.0
    assert after["revisions"] == {
        "revised_judgments": 1,
        "earlier_answers": 1,
        "rule": "every figure reads each judgment's latest revision; earlier answers are kept apart",
    }


# --- the annotator's pages and REST -----------------------------------------------------------------


def test_an_annotator_lists_their_answers_and_revises_one_on_the_page():
    study, ada = label_study(), make_annotator("ada")
    judgment = answered(study, ada, label=1, rationale="Same plot.", spans=[{"start": 0, "end": 4}])
    passage = judgment.item.candidates.get().passage.text
    browser = session_client(ada)
    listing = browser.get(f"/annotate/{study.pk}/answers/").content.decode()
    assert f"/annotate/{study.pk}/answers/{judgment.item_id}/" in listing and "1 · Relevant" in listing
    form = browser.get(f"/annotate/{study.pk}/answers/{judgment.item_id}/").content.decode()
    assert 'name="label" value="1" required checked' in form and "Same plot." in form
    assert f"keep “{passage[:4]}”" in form
    words = passage.split()[-1]
    response = browser.post(
        f"/annotate/{study.pk}/answers/{judgment.item_id}/",
        {"label": "0", "rationale": "The ending differs.", "new_spans": words, "keep_span": []},
        follow=True,
    )
    assert "Your answer was revised (answer 2)" in response.content.decode()
    judgment.refresh_from_db()
    start = passage.index(words)
    assert (judgment.label, judgment.rationale) == (0, "The ending differs.")
    assert judgment.spans == [{"target": "passage", "start": start, "end": start + len(words)}]


def test_an_excerpt_that_is_missing_or_ambiguous_is_refused_with_the_reason():
    study, ada = label_study(), make_annotator()
    judgment = answered(study, ada, label=1)
    browser = session_client(ada)
    url = f"/annotate/{study.pk}/answers/{judgment.item_id}/"
    missing = browser.post(url, {"label": "0", "new_spans": "words nobody wrote"}, follow=True).content.decode()
    assert "does not occur in the text" in missing
    passage = judgment.item.candidates.get().passage.text
    letter = next(character for character in passage if passage.count(character) > 1)
    twice = browser.post(url, {"label": "0", "new_spans": letter}, follow=True).content.decode()
    assert "occurs" in twice and "times in the text" in twice
    assert Judgment.objects.get().label == 1 and not JudgmentRevision.objects.exists()


def test_a_proxy_answer_is_revised_over_rest():
    study = make_relic_proxy_study(2, judgments_per_item=1)
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    ada = make_annotator()
    client = api_client(ada)
    item = client.get(f"/api/annotate/{study.pk}/next/").json()["item"]
    client.post(f"/api/annotate/{study.pk}/submit/", {"item": item, "position": 0}, format="json")
    listing = client.get(f"/api/annotate/{study.pk}/answers/").json()
    assert [row["item"] for row in listing["results"]] == [item] and listing["results"][0]["answer"] == "option 1"
    shown = client.get(f"/api/annotate/{study.pk}/answers/{item}/").json()
    assert shown["answer"]["position"] == 0 and shown["refusal"] is None and len(shown["candidates"]) == 3
    revised = client.post(f"/api/annotate/{study.pk}/answers/{item}/", {"position": 2}, format="json")
    assert revised.status_code == 200 and revised.json()["created"] is True
    assert revised.json()["answer"]["position"] == 2 and revised.json()["revision"] == 2
    same = client.post(f"/api/annotate/{study.pk}/answers/{item}/", {"position": 2}, format="json")
    assert same.json()["created"] is False
    bad = client.post(f"/api/annotate/{study.pk}/answers/{item}/", {"position": 9}, format="json")
    assert bad.status_code == 400 and "position" in bad.json()["detail"]
    PeerReview.objects.create(judgment=Judgment.objects.get(), reviewer=make_annotator())
    final = client.post(f"/api/annotate/{study.pk}/answers/{item}/", {"position": 0}, format="json")
    assert final.status_code == 409 and "seen" in final.json()["detail"]
    assert Judgment.objects.get().choice.position == 2


def test_in_a_study_shuffled_per_annotator_a_revision_reads_and_shows_the_annotators_own_places():
    study = make_relic_proxy_study(2, judgments_per_item=1)
    ada = make_annotator()
    # A seed under which ada sees neither item's candidates in the item's own order (ids differ
    # between databases, and a shuffle may by chance give the identity).
    seed = next(
        seed
        for seed in range(100)
        if all(annotator_order(seed, item.pk, ada.pk, 3) != [0, 1, 2] for item in study.items.all())
    )
    Study.objects.filter(pk=study.pk).update(
        allow_revisions=True, candidate_order=Study.CandidateOrder.ANNOTATOR, seed=seed
    )
    client = api_client(ada)
    served = client.get(f"/api/annotate/{study.pk}/next/").json()
    ids = [candidate["id"] for candidate in served["candidates"]]
    client.post(f"/api/annotate/{study.pk}/submit/", {"item": served["item"], "position": 0}, format="json")
    judgment = Judgment.objects.get()
    assert judgment.choice_id == ids[0] and judgment.shown_order != [0, 1, 2]
    shown = client.get(f"/api/annotate/{study.pk}/answers/{served['item']}/").json()
    assert [candidate["id"] for candidate in shown["candidates"]] == ids
    assert shown["answer"]["position"] == 0
    assert client.get(f"/api/annotate/{study.pk}/answers/").json()["results"][0]["answer"] == "option 1"
    revised = client.post(f"/api/annotate/{study.pk}/answers/{served['item']}/", {"position": 2}, format="json")
    assert revised.status_code == 200 and revised.json()["answer"]["position"] == 2
    judgment.refresh_from_db()
    assert judgment.choice_id == ids[2] and judgment.revision == 2
    assert JudgmentRevision.objects.get(judgment=judgment).choice_id == ids[0]


def test_a_preference_study_never_offers_revisions():
    study = make_preference_study()
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    response = api_client(make_annotator()).get(f"/api/annotate/{study.pk}/answers/")
    assert response.status_code == 403 and "preference" in response.json()["detail"]


def test_the_answers_page_costs_the_same_statements_whatever_its_rows_and_who_saw_them(
    django_assert_max_num_queries,
):
    """Whether others saw each answer (peer review, adjudication, void) and how many candidates its
    item has come with the page's judgments: a page of four rows, some of them final, runs no more
    statements than a page of one."""
    study, ada, staff = label_study(), make_annotator("ada"), make_user(staff=True)
    answered(study, ada, label=1)
    client = api_client(ada)
    with CaptureQueriesContext(connection) as one_row:
        assert len(client.get(f"/api/annotate/{study.pk}/answers/").json()["results"]) == 1
    more = make_label_study(items=4, label_schema=SCHEMA, allow_revisions=True)
    judgments = [answered(more, ada, label=1) for _ in range(4)]
    Judgment.objects.filter(pk=judgments[0].pk).update(shown_order=None)  # read in the order shown now
    PeerReview.objects.create(judgment=judgments[1], reviewer=make_annotator())
    adjudicate(judgments[2].item, by=staff, label=0)
    with django_assert_max_num_queries(len(one_row.captured_queries)):
        rows = client.get(f"/api/annotate/{more.pk}/answers/").json()["results"]
    refusals = {row["item"]: row["refusal"] for row in rows}
    assert [refusals[judgment.item_id] for judgment in judgments] == [
        None,
        "someone else has already seen this answer; it is final",
        "someone else has already seen this answer; it is final",
        None,
    ]
    assert {row["answer"] for row in rows} == {"1 · Relevant"}
