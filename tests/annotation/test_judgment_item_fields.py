"""Each judgment's copy of its item's study and role (Judgment.study, Judgment.item_role: the staff
pages count and take medians from indexes that lead with them) equals what its item says, after
every path that writes judgments: a web submission on a work and on a hidden gold item, a void,
a revision, an undo and an import; the migration fills the judgments that existed before it; and
an item that has a judgment never changes role, so the copy cannot go stale. The truth is read
from the items here, row by row."""

from importlib import import_module

import pytest
from django.apps import apps

from annotation.models import Item, Judgment, Study
from annotation.services import claim_next_item, submit_judgment, void_judgment
from annotation.services.annotator_actions import undo_last_submission
from annotation.services.quality import designate_items
from annotation.services.revisions import revise_judgment
from retrieval.errors import InputError
from tests.factories import call_json_command, make_annotator, make_relic_proxy_study, make_user, write_jsonl

pytestmark = pytest.mark.django_db


def copies_hold(study: Study) -> None:
    judgments = list(Judgment.objects.filter(item__study=study).select_related("item"))
    assert judgments
    assert [(j.study_id, j.item_role) for j in judgments] == [(j.item.study_id, j.item.role) for j in judgments]
    assert Judgment.objects.filter(study=study).count() == len(judgments)


def answer_all(study: Study, annotator, position: int) -> list[Judgment]:
    answered = []
    while (claim := claim_next_item(study, annotator)) is not None:
        answered.append(submit_judgment(annotator=annotator, item=claim.item, position=position, seconds=4).judgment)
    return answered


def test_every_path_that_writes_judgments_copies_the_items_study_and_role(tmp_path):
    other = make_relic_proxy_study(2, judgments_per_item=1)  # a second study: no judgment strays into it
    study = make_relic_proxy_study(6, judgments_per_item=3)
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    study.refresh_from_db()
    gold = designate_items(study, Item.Role.GOLD, count=2, seed=1)
    staff = make_user("curator", staff=True)
    first, second = make_annotator("first"), make_annotator("second")
    answered = answer_all(study, first, 0)
    assert {j.item_role for j in answered} == {Item.Role.WORK, Item.Role.GOLD}
    answer_all(other, first, 0)
    copies_hold(study)
    copies_hold(other)

    void_judgment(answered[0], by=staff, reason="slipped")
    revise_judgment(answer_all(study, second, 1)[0], second, position=2)
    undo_last_submission(study, second)
    copies_hold(study)

    late = make_annotator("late")
    rows = [
        {"item": item.pk, "annotator": late.username, "choice": item.candidates.get(position=0).passage.external_id}
        for item in [*gold, study.items.filter(role=Item.Role.WORK).first()]
    ]
    assert call_json_command("import_judgments", study.pk, write_jsonl(tmp_path / "late.jsonl", rows))["rejected"] == 0
    assert Judgment.objects.filter(study=study, annotator=late, item_role=Item.Role.GOLD).count() == 2
    copies_hold(study)


def test_an_item_with_a_judgment_keeps_its_role():
    study = make_relic_proxy_study(3, judgments_per_item=1)
    judged = answer_all(study, make_annotator("only"), 0)[0].item
    with pytest.raises(InputError, match="not an unjudged work item"):
        designate_items(study, Item.Role.GOLD, items=[judged])
    assert Item.objects.get(pk=judged.pk).role == Item.Role.WORK


def test_the_migration_fills_the_judgments_that_existed_before_it():
    study = make_relic_proxy_study(4, judgments_per_item=2)
    designate_items(study, Item.Role.GOLD, count=1, seed=0)
    for n in range(2):
        answer_all(study, make_annotator(f"m{n}"), n)
    other = make_relic_proxy_study(1, judgments_per_item=1)
    Judgment.objects.update(study=other, item_role=Item.Role.QUALIFICATION)  # wrong everywhere
    import_module("annotation.migrations.0014_staff_speed_judgment_study_role").copy_item_fields(apps, None)
    copies_hold(study)
    assert Judgment.objects.filter(study=study, item_role=Item.Role.GOLD).count() == 2
