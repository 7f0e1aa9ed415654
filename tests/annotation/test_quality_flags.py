"""Automatic flags: low gold accuracy, implausibly fast answers (against the study's median) and
low peer-review pass rates, raised once, kept up to date, and left to staff to resolve."""

import pytest

from annotation.models import AnnotatorFlag, Item, Judgment, PeerReview
from annotation.services.quality import designate_items, refresh_flags, resolve_flag, speeds
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db

LOW_GOLD, TOO_FAST, LOW_PEER = (
    AnnotatorFlag.Reason.LOW_GOLD_ACCURACY,
    AnnotatorFlag.Reason.TOO_FAST,
    AnnotatorFlag.Reason.LOW_PEER_PASS_RATE,
)


def open_flags(study) -> set[tuple[str, str]]:
    return set(
        AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True).values_list("annotator__username", "reason")
    )


def answer_gold(study, annotator, right: int, wrong: int) -> None:
    """Answer `right` gold items correctly, then `wrong` of the next ones wrongly."""
    gold = list(study.items.filter(role=Item.Role.GOLD).order_by("position"))
    for index, item in enumerate(gold[: right + wrong]):
        correct = item.candidates.get(is_gold=True).position
        add_judgment(item, annotator, position=correct if index < right else (correct + 1) % 3)


def gold_study(gold=6):
    study = make_relic_proxy_study(gold + 2)
    designate_items(study, Item.Role.GOLD, count=gold)
    return study


def timed_study(times: dict[str, list[float]]):
    """A binary relevance study where each named annotator labels one item per given time."""
    study = make_label_study(items=max(len(values) for values in times.values()), judgments_per_item=len(times))
    items = list(study.items.order_by("position"))
    for username, values in times.items():
        annotator = make_annotator(username)
        for item, seconds in zip(items, values):
            add_label_judgment(item, annotator, 1, seconds=seconds)
    return study


def test_an_annotator_below_the_gold_accuracy_threshold_is_flagged():
    study = gold_study()
    answer_gold(study, make_annotator("sloppy"), right=1, wrong=2)
    answer_gold(study, make_annotator("careful"), right=3, wrong=0)
    assert refresh_flags(study) == {"created": 1, "updated": 0, "open": 1}
    flag = AnnotatorFlag.objects.get(study=study)
    assert (flag.annotator.username, flag.reason) == ("sloppy", LOW_GOLD)
    assert flag.value == pytest.approx(1 / 3) and flag.threshold == study.gold_accuracy_threshold
    assert flag.details == {"correct": 1, "gold_judgments": 3, "evidence": 3}


def test_too_little_gold_evidence_flags_nobody():
    study = gold_study()
    answer_gold(study, make_annotator("new"), right=0, wrong=2)
    assert refresh_flags(study)["created"] == 0
    assert refresh_flags(study, min_evidence=2)["created"] == 1


def test_an_annotator_much_faster_than_the_study_median_is_flagged():
    study = timed_study({"steady": [20, 22, 18, 21], "calm": [25, 19, 20, 24], "rushed": [2, 3, 2, 3]})
    measured = speeds(study)
    assert measured.study_median == 19.5  # the median of all twelve counted judgments
    assert measured.medians == {"calm": 22.0, "rushed": 2.5, "steady": 20.5}
    refresh_flags(study)
    assert open_flags(study) == {("rushed", TOO_FAST)}
    flag = AnnotatorFlag.objects.get(study=study)
    assert flag.value == 2.5 and flag.threshold == pytest.approx(0.3 * 19.5)


def test_the_server_time_stands_in_when_the_client_sent_none():
    study = timed_study({"steady": [20, 20, 20], "quiet": [20, 20, 20]})
    Judgment.objects.filter(annotator__username="quiet").update(seconds=None, server_seconds=1.0)
    assert speeds(study).medians["quiet"] == 1.0
    refresh_flags(study)
    assert open_flags(study) == {("quiet", TOO_FAST)}


def test_gold_answers_do_not_count_towards_speed():
    study = make_label_study(items=3, judgments_per_item=2)
    gold = add_label_item(study, expected_label=1)
    designate_items(study, Item.Role.GOLD, items=[gold])
    annotator = make_annotator("a")
    for item in study.items.filter(role=Item.Role.WORK):
        add_label_judgment(item, annotator, 1, seconds=10)
    add_label_judgment(gold, annotator, 1, seconds=1)
    assert speeds(study).medians == {"a": 10}


def test_a_low_peer_pass_rate_is_flagged():
    study = timed_study({"author": [10, 10, 10, 10], "reviewer": [10, 10, 10, 10]})
    reviewer = make_user("peer")
    verdicts = ["pass", "pass", "pass", "fail"]
    for judgment, verdict in zip(Judgment.objects.filter(annotator__username="author"), verdicts):
        PeerReview.objects.create(judgment=judgment, reviewer=reviewer, verdict=verdict)
    refresh_flags(study)
    flag = AnnotatorFlag.objects.get(study=study)
    assert (flag.annotator.username, flag.reason, flag.value) == ("author", LOW_PEER, 0.75)
    assert flag.threshold == 0.95


def test_refreshing_again_updates_the_open_flag_instead_of_adding_one():
    study = gold_study()
    sloppy = make_annotator("sloppy")
    answer_gold(study, sloppy, right=0, wrong=3)
    refresh_flags(study)
    gold = study.items.filter(role=Item.Role.GOLD).order_by("position")
    add_judgment(gold[3], sloppy, position=gold[3].candidates.get(is_gold=True).position)
    assert refresh_flags(study) == {"created": 0, "updated": 1, "open": 1}
    flag = AnnotatorFlag.objects.get(study=study)
    assert flag.value == 0.25 and flag.details["evidence"] == 4


def test_a_resolved_flag_returns_only_when_new_evidence_arrives():
    study = gold_study()
    sloppy = make_annotator("sloppy")
    answer_gold(study, sloppy, right=0, wrong=3)
    refresh_flags(study)
    staff = make_user("lead", staff=True)
    resolved = resolve_flag(AnnotatorFlag.objects.get(study=study), by=staff)
    assert resolved.resolved_by == staff and resolved.resolved_at is not None
    assert refresh_flags(study)["created"] == 0 and open_flags(study) == set()
    gold = study.items.filter(role=Item.Role.GOLD).order_by("position")
    add_judgment(gold[3], sloppy, position=(gold[3].candidates.get(is_gold=True).position + 1) % 3)
    assert refresh_flags(study)["created"] == 1
    assert AnnotatorFlag.objects.filter(study=study).count() == 2 and open_flags(study) == {("sloppy", LOW_GOLD)}
