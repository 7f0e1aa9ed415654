"""The median seconds the staff pages show are found by the database (annotation.selectors.
median_seconds: the middle one or two values of an ORDER BY) and must equal statistics.median
and numpy's median over the same judgments, exactly: odd and even counts, ties, untimed
judgments, voided ones, the server's time where the client gave none (the quality page), hidden
gold items and a blocked annotator whose judgments are excluded."""

import statistics

import numpy as np
import pytest

from annotation.models import Item, Judgment, StudyBlock
from annotation.selectors import counted_judgments, median_seconds
from annotation.services.quality import block_annotator, speeds
from console.selectors import annotator_rows
from tests.factories import add_judgment, make_annotator, make_relic_proxy_study

pytestmark = pytest.mark.django_db

ITEMS = 9


def timed_study(seed: int):
    """Four annotators on every item, with seeded whole-second times (ties), about a fifth
    untimed by the client (the server's time is kept), an eighth voided, two hidden gold items;
    the last annotator blocked with their judgments excluded."""
    rng = np.random.default_rng(seed)
    study = make_relic_proxy_study(ITEMS, judgments_per_item=4)
    Item.objects.filter(pk__in=study.items.order_by("position").values("pk")[:2]).update(role=Item.Role.GOLD)
    people = [make_annotator(f"timed{n}") for n in range(4)]
    for item in study.items.all():
        for person in people:
            judgment = add_judgment(item, person, int(rng.integers(0, 3)))
            Judgment.objects.filter(pk=judgment.pk).update(
                seconds=None if rng.random() < 0.2 else float(rng.integers(1, 8)),
                server_seconds=float(rng.integers(1, 30)) + 0.25,
                voided=bool(rng.random() < 0.125),
            )
    block_annotator(study, people[-1], by=None, reason="rushing", exclude_judgments=True)
    return study, people


def python_median(values: list[float]) -> float | None:
    """statistics.median, checked against numpy's; None without values."""
    if not values:
        return None
    assert statistics.median(values) == float(np.median(values))
    return statistics.median(values)


@pytest.mark.parametrize("seed", range(4))
def test_the_study_pages_medians_are_the_medians_of_each_annotators_live_timed_judgments(seed):
    study, people = timed_study(seed)
    rows = {row["annotator"].username: row["median_seconds"] for row in annotator_rows(study)}
    for person in people:
        live = Judgment.objects.filter(item__study=study, annotator=person, voided=False)
        assert rows[person.username] == python_median([j.seconds for j in live if j.seconds is not None])


@pytest.mark.parametrize("seed", range(4))
def test_the_quality_pages_medians_are_the_medians_of_the_counted_judgments_times(seed):
    study, people = timed_study(seed)
    counted = list(counted_judgments(study))
    assert StudyBlock.objects.filter(study=study).exists() and people[-1] not in {j.annotator for j in counted}
    assert any(j.seconds is None for j in counted)  # the server's time stands in

    def seconds(judgment: Judgment) -> float:
        return judgment.seconds if judgment.seconds is not None else judgment.server_seconds

    measured = speeds(study)
    assert measured.study_median == python_median([seconds(j) for j in counted])
    expected = {
        person.username: [seconds(j) for j in counted if j.annotator_id == person.pk]
        for person in people
        if any(j.annotator_id == person.pk for j in counted)
    }
    assert measured.medians == {name: python_median(values) for name, values in expected.items()}
    assert measured.counts == {name: len(values) for name, values in expected.items()}


def test_even_counts_average_the_two_middle_values_and_no_times_give_no_median():
    study, (person, *_) = timed_study(0)
    judgments = Judgment.objects.filter(item__study=study, annotator=person)
    pks = list(judgments.order_by("pk").values_list("pk", flat=True))
    Judgment.objects.filter(pk__in=pks).update(seconds=None, voided=False)
    for pk, value in zip(pks, (4.0, 1.0, 4.0, 2.5), strict=False):
        Judgment.objects.filter(pk=pk).update(seconds=value)
    assert median_seconds(judgments, "seconds") == (3.25, 4)  # (2.5 + 4.0) / 2 over 1.0, 2.5, 4.0, 4.0
    assert median_seconds(judgments.filter(seconds__isnull=True), "seconds") is None
