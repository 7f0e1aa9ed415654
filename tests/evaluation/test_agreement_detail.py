"""Agreement per annotator, per label and over time (the report's `agreement_detail`) against
independent computations on the same judgments: sklearn's cohen_kappa_score and
confusion_matrix, statsmodels' cohens_kappa, the krippendorff package, all fed pairs and
matrices built here from the stored judgments."""

import datetime as dt

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from statsmodels.stats.inter_rater import cohens_kappa

from annotation.majority import majority_votes
from annotation.models import Item, Judgment
from evaluation import alerts
from evaluation.reports import cached_study_report
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    call_json_command,
    make_annotator,
    make_label_study,
    make_proxy_study,
    make_speech_quotability_study,
)

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

VALUES = [0, 1, 2, 3]
NAMES = ["ann", "bea", "cal", "dan", "eve"]
SKILL = {"ann": 0.9, "bea": 0.8, "cal": 0.75, "dan": 0.5, "eve": 0.3}
START = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def graded_study():
    """30 items on a 0-3 scale, each judged by three or four of five annotators of different
    skill, the judgments spread over three days in a seeded order; four hidden gold items."""
    rng = np.random.default_rng(5)
    study = make_label_study(items=30, label_schema={"scale": "graded-0-3"}, judgments_per_item=4)
    people = {name: make_annotator(name) for name in NAMES}
    judgments = []
    for item in study.items.order_by("position"):
        truth = int(rng.integers(4))
        for name in sorted(rng.choice(NAMES, size=int(rng.integers(3, 5)), replace=False)):
            label = truth if rng.random() < SKILL[name] else int(rng.integers(4))
            judgments.append(add_label_judgment(item, people[name], label))
    for expected in (0, 3, 2, 1):
        gold = add_label_item(study, role=Item.Role.GOLD, expected_label=expected)
        for name in NAMES[:3]:
            add_label_judgment(gold, people[name], expected if name != "cal" else (expected + 1) % 4)
    for step, index in enumerate(rng.permutation(len(judgments)).tolist()):
        at = START + dt.timedelta(minutes=37 * step)  # about four days
        Judgment.objects.filter(pk=judgments[index].pk).update(submitted_at=at)
    Judgment.objects.filter(item__role=Item.Role.GOLD).update(submitted_at=START)
    return study


def stored(study, role=Item.Role.WORK):
    """(judgment id, submitted_at, item, annotator, label) of the study's judgments of `role`,
    in submission order."""
    return list(
        Judgment.objects.filter(item__study=study, item__role=role, voided=False)
        .order_by("submitted_at", "pk")
        .values_list("pk", "submitted_at", "item_id", "annotator__username", "label")
    )


def pairs_of(rows, chosen):
    """(own label, other's label) for every judgment in `chosen` with every other judgment of its item."""
    by_item = {}
    for _, _, item, name, label in rows:
        by_item.setdefault(item, []).append((name, label))
    own, other = [], []
    for _, _, item, name, label in chosen:
        for other_name, other_label in by_item[item]:
            if other_name != name:
                own.append(label)
                other.append(other_label)
    return own, other


def reliability(rows, items):
    """Annotators x items matrix (NaN: not judged) for the krippendorff package."""
    matrix = np.full((len(NAMES), len(items)), np.nan)
    column = {item: index for index, item in enumerate(items)}
    for _, _, item, name, label in rows:
        if item in column:
            matrix[NAMES.index(name), column[item]] = label
    return matrix


def test_per_annotator_agreement_with_the_others_the_gold_and_the_majority(graded_study):
    report = cached_study_report(graded_study)
    detail = report["agreement_detail"]
    rows = stored(graded_study)
    majority = {}
    by_item = {}
    for _, _, item, _, label in rows:
        by_item.setdefault(item, []).append(label)
    for item, labels in by_item.items():
        majority[item] = majority_votes([labels], tie_rule="lowest")[0].label
    gold_rows = stored(graded_study, Item.Role.GOLD)
    expected_label = dict(Item.objects.filter(study=graded_study).values_list("pk", "expected_label"))
    ds_labels = call_json_command("aggregate_labels", graded_study.pk, "--method", "dawid-skene")["labels"]
    for name in NAMES:
        entry = detail["annotators"][name]
        mine = [row for row in rows if row[3] == name]
        own, other = pairs_of(rows, mine)
        assert entry["judgments"] == len(mine)
        assert entry["vs_others"]["pairs"] == len(own)
        assert entry["vs_others"]["percent_agreement"] == pytest.approx(np.mean(np.equal(own, other)))
        assert entry["vs_others"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(own, other), abs=1e-12)
        table = confusion_matrix(own, other, labels=VALUES)
        assert entry["vs_others"]["cohen_kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)

        given = [row[4] for row in mine]
        reference = [majority[row[2]] for row in mine]
        assert entry["vs_aggregate"]["majority"]["agreement"] == pytest.approx(np.mean(np.equal(given, reference)))
        assert entry["vs_aggregate"]["majority"]["cohen_kappa"] == pytest.approx(
            cohen_kappa_score(given, reference), abs=1e-12
        )
        modelled = [ds_labels[str(row[2])] for row in mine]
        assert entry["vs_aggregate"]["dawid-skene"]["units"] == len(mine)
        assert entry["vs_aggregate"]["dawid-skene"]["cohen_kappa"] == pytest.approx(
            cohen_kappa_score(given, modelled), abs=1e-12
        )

        gold = [(row[4], expected_label[row[2]]) for row in gold_rows if row[3] == name]
        if gold:
            assert entry["vs_gold"]["units"] == len(gold)
            assert entry["vs_gold"]["agreement"] == pytest.approx(np.mean([g == e for g, e in gold]))
            kappa = cohen_kappa_score([g for g, _ in gold], [e for _, e in gold])
            assert entry["vs_gold"]["cohen_kappa"] == pytest.approx(kappa, abs=1e-12)
        else:
            assert entry["vs_gold"] == {"units": 0, "agreement": None, "cohen_kappa": None}
    assert detail["annotators"]["cal"]["vs_gold"]["agreement"] == 0.0  # cal missed every hidden gold item


def test_per_label_confusion_tables_and_specific_agreement(graded_study):
    detail = cached_study_report(graded_study)["agreement_detail"]["labels"]
    rows = stored(graded_study)
    by_item = {}
    for _, _, item, _, label in rows:
        by_item.setdefault(item, []).append(label)
    majority = {item: majority_votes([labels], tie_rule="lowest")[0].label for item, labels in by_item.items()}
    expected = confusion_matrix([majority[row[2]] for row in rows], [row[4] for row in rows], labels=VALUES)
    assert detail["vs_majority"] == expected.tolist()
    own, other = pairs_of(rows, rows)
    pairs = confusion_matrix(own, other, labels=VALUES)
    assert detail["pairs"] == pairs.tolist() and (pairs == pairs.T).all()
    for value in VALUES:
        figures = detail["labels"][str(value)]
        assert figures["given"] == sum(row[4] == value for row in rows)
        assert figures["specific_agreement"] == pytest.approx(2 * pairs[value, value] / (2 * pairs[value].sum()))
        assert figures["recall_vs_majority"] == pytest.approx(expected[value, value] / expected[value].sum())
    gold_rows = stored(graded_study, Item.Role.GOLD)
    expected_label = dict(Item.objects.filter(study=graded_study).values_list("pk", "expected_label"))
    gold = confusion_matrix([expected_label[row[2]] for row in gold_rows], [row[4] for row in gold_rows], labels=VALUES)
    assert detail["vs_gold"] == gold.tolist()


def test_agreement_by_day_and_by_batch_of_judgments(graded_study):
    alerts.set_watch(graded_study, batch_size=17)
    detail = cached_study_report(graded_study)["agreement_detail"]
    rows = stored(graded_study)
    last_judged = {}
    for row in rows:
        last_judged[row[2]] = row
    over_time = detail["over_time"]
    assert over_time["batch_size"] == 17 and over_time["alpha_level"] == "ordinal"

    def check(window, chosen):
        own, other = pairs_of(rows, chosen)
        assert window["judgments"] == len(chosen)
        assert window["annotators"] == len({row[3] for row in chosen})
        assert window["pairs"] == len(own)
        assert window["cohen_kappa"] == pytest.approx(cohen_kappa_score(own, other), abs=1e-12)
        ids = {row[0] for row in chosen}
        completed = [item for item, row in last_judged.items() if row[0] in ids]
        assert window["completed_units"] == len(completed)
        if len(completed) >= 2:
            alpha = krippendorff.alpha(
                reliability_data=reliability(rows, completed), level_of_measurement="ordinal", value_domain=VALUES
            )
            assert window["krippendorff_alpha"] == pytest.approx(alpha, abs=1e-9)

    days = sorted({row[1].date() for row in rows})
    assert [window["day"] for window in over_time["by_day"]] == [str(day) for day in days] and len(days) >= 2
    for window, day in zip(over_time["by_day"], days, strict=True):
        check(window, [row for row in rows if row[1].date() == day])
    batches = [rows[start : start + 17] for start in range(0, len(rows), 17)]
    assert [window["batch"] for window in over_time["by_batch"]] == list(range(1, len(batches) + 1))
    for window, batch in zip(over_time["by_batch"], batches, strict=True):
        check(window, batch)

    everything = krippendorff.alpha(
        reliability_data=reliability(rows, sorted(last_judged)), level_of_measurement="ordinal", value_domain=VALUES
    )
    assert detail["study"] == {
        "measure": "krippendorff_alpha",
        "level": "ordinal",
        "value": pytest.approx(everything, abs=1e-9),
        "units": 30,
    }


def test_a_proxy_study_confuses_positions_with_the_gold_and_its_pairs_match_sklearn():
    gold_positions = [0, 1, 2, 0, 1, 2, 0, 1]
    study = make_proxy_study(gold_positions=gold_positions, judgments_per_item=3)
    people = [make_annotator(name) for name in ("p", "q", "r")]
    choices = [[0, 0, 1], [1, 1, 1], [0, 2, 0], [0, 0, 0], [0, 1, 0], [2, 2, 0], [0, 0, 0], [0, 1, 0]]
    for item, chosen in zip(study.items.order_by("position"), choices, strict=True):
        for person, position in zip(people, chosen, strict=True):
            add_judgment(item, person, position)
    detail = cached_study_report(study)["agreement_detail"]
    gold = [g for g, chosen in zip(gold_positions, choices, strict=True) for _ in chosen]
    flat = [position for chosen in choices for position in chosen]
    assert detail["labels"]["vs_gold"] == confusion_matrix(gold, flat, labels=[0, 1, 2]).tolist()
    assert detail["labels"]["vs_gold"][1] == [4, 5, 0]  # gold at position 1 thrice: position 0 chosen 4 times
    for index, name in enumerate(("p", "q", "r")):
        own = [chosen[index] for chosen in choices for _ in range(2)]
        other = [chosen[j] for chosen in choices for j in range(3) if j != index]
        assert detail["annotators"][name]["vs_others"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(own, other))
        mine = [chosen[index] for chosen in choices]
        assert detail["annotators"][name]["vs_gold"]["agreement"] == pytest.approx(
            np.mean(np.equal(mine, gold_positions))
        )
    assert detail["study"]["level"] == "nominal"
    matrix = np.array(choices, dtype=float).T
    assert detail["study"]["value"] == pytest.approx(krippendorff.alpha(matrix, level_of_measurement="nominal"))


def test_a_multi_select_batch_counts_judgments_not_paragraphs():
    study = make_speech_quotability_study(multi_select=True)
    item = study.items.get()
    for name, chosen in {"ann": [0, 1], "bea": [0], "cal": [1, 2], "dan": [0, 1], "eve": []}.items():
        add_label_judgment(item, make_annotator(name), selections=chosen)
    alerts.set_watch(study, batch_size=2)
    over_time = cached_study_report(study)["agreement_detail"]["over_time"]
    assert [window["judgments"] for window in over_time["by_batch"]] == [2, 2, 1]
    paragraphs = item.candidates.count()
    assert sum(window["pairs"] for window in over_time["by_batch"]) == paragraphs * 5 * 4
