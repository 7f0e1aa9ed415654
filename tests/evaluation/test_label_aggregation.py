"""`aggregate_labels` on real studies: a proxy study that annotators work through the annotator API
(some careful, two answering at random, one choosing wrong on purpose), a relevance study and a
multi-select quotability study. Labels, competences and posteriors equal crowd-kit's on a frame
built here from the stored judgments; only counted judgments enter; the soft-label export keeps
every item's distribution; competence-model qrels."""

import io
import json

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import GLAD, MACE, DawidSkene, MajorityVote
from django.core.management import CommandError, call_command
from scipy.special import expit

from annotation.models import Judgment, StudyBlock
from annotation.services.quality import block_annotator
from evaluation.label_models import aggregate
from tests.factories import (
    add_label_judgment,
    api_client,
    call_json_command,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_speech_quotability_study,
    make_user,
    next_url,
    submit_url,
)

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

# Each simulated annotator's chance of choosing the gold; None: a uniformly random option.
WORKERS = {"ada": 0.95, "ben": 0.9, "cleo": 0.85, "dev": 0.8, "rand-1": None, "rand-2": None, "contrarian": 0.05}


def work_through_the_api(study, accuracy: dict, seed: int = 3) -> None:
    """Each annotator takes items from /next/ and answers through /submit/, in turns, until the
    queue has nothing left for anyone; the test (not the annotator) looks up the gold to decide
    whether this answer is right."""
    rng = np.random.default_rng(seed)
    clients = {name: api_client(make_annotator(name)) for name in accuracy}
    active = set(accuracy)
    while active:
        for name in sorted(active):
            payload = clients[name].get(next_url(study)).json()
            if payload["finished"] or payload["item"] is None:
                active.discard(name)
                continue
            options = len(payload["candidates"])
            gold = study.items.get(pk=payload["item"]).candidates.get(is_gold=True).position
            chance = accuracy[name]
            if chance is None:
                position = int(rng.integers(options))
            elif rng.random() < chance:
                position = gold
            else:
                position = int((gold + rng.integers(1, options)) % options)
            body = {"item": payload["item"], "position": position, "seconds": 5}
            assert clients[name].post(submit_url(study), body, format="json").status_code == 201


def stored_frame(study) -> pd.DataFrame:
    """crowd-kit's frame from the judgments as stored: counted ones (not voided, no excluded
    annotator), task = item id, label = the position chosen, rows by task then annotator."""
    excluded = StudyBlock.objects.filter(study=study, exclude_judgments=True).values("annotator")
    rows = (
        Judgment.objects.filter(item__study=study, voided=False)
        .exclude(annotator__in=excluded)
        .values_list("item_id", "annotator__username", "choice__position", "label")
    )
    frame = pd.DataFrame(
        [(item, name, label if position is None else position) for item, name, position, label in rows],
        columns=["task", "worker", "label"],
    )
    return frame.sort_values(["task", "worker"]).reset_index(drop=True)


def keyed(mapping: dict) -> dict:
    """JSON object keys are strings: compare with crowd-kit's by str(key)."""
    return {str(key): value for key, value in mapping.items()}


@pytest.fixture
def worked_study():
    study = make_relic_proxy_study(24, judgments_per_item=4, seed=11)
    work_through_the_api(study, WORKERS)
    return study


def test_a_study_worked_through_the_annotator_api_gets_crowd_kits_labels_and_competences(worked_study):
    study = worked_study
    outputs = {
        method: call_json_command("aggregate_labels", study.pk, "--method", method)
        for method in ("majority", "dawid-skene", "mace", "glad")
    }
    assert Judgment.objects.filter(item__study=study).count() == 24 * 4
    for method, output in outputs.items():
        assert output.keys() >= {"method", "labels", "competence", "changed_from_majority"}
        assert output["method"] == method and len(output["labels"]) == 24
        assert set(output["competence"]) == set(WORKERS)
        assert all(0.0 <= value <= 1.0 for value in output["competence"].values())
        changed = [item for item, label in output["labels"].items() if outputs["majority"]["labels"][item] != label]
        assert output["changed_from_majority"] == len(changed) and sorted(map(str, output["changed_items"])) == sorted(
            changed
        )
    assert outputs["majority"]["changed_from_majority"] == 0

    frame = stored_frame(study)
    majority = MajorityVote().fit(frame)
    untied = majority.probas_.max(axis=1) > 0.5
    assert {k: v for k, v in outputs["majority"]["labels"].items() if untied[int(k)]} == keyed(
        majority.labels_[untied].to_dict()
    )
    ds = DawidSkene().fit(frame)
    assert outputs["dawid-skene"]["labels"] == keyed(ds.labels_.to_dict())
    for name in WORKERS:
        errors = ds.errors_.loc[name]
        expected = sum(ds.priors_[c] * errors.loc[c, c] for c in ds.priors_.index if c in errors.index)
        assert outputs["dawid-skene"]["competence"][name] == pytest.approx(expected, abs=1e-12)
    mace = MACE(random_state=study.seed).fit(frame)
    assert outputs["mace"]["labels"] == keyed(mace.labels_.to_dict())
    workers = pd.factorize(frame["worker"])[1]
    assert outputs["mace"]["competence"] == pytest.approx(dict(zip(workers, mace.spamming_[:, 1])), abs=1e-12)
    glad = GLAD().fit(frame)
    assert outputs["glad"]["labels"] == keyed(glad.labels_.to_dict())
    for task, row in glad.probas_.iterrows():
        assert keyed(outputs["glad"]["posteriors"][str(task)]) == pytest.approx(keyed(row.to_dict()), abs=1e-9)
    for name, alpha in glad.alphas_.items():
        tasks = frame.loc[frame["worker"] == name, "task"]
        expected = expit(alpha * np.exp(glad.betas_[tasks].to_numpy())).mean()
        assert outputs["glad"]["competence"][name] == pytest.approx(expected, abs=1e-9)

    # The careful annotators are trusted more than the random and the contrary ones.
    for method in ("dawid-skene", "mace", "glad"):
        competence = outputs[method]["competence"]
        trusted = min(competence[name] for name in ("ada", "ben"))
        assert trusted > max(competence[name] for name in ("rand-1", "rand-2", "contrarian")), method
    # Seeded with the study's seed: the same judgments give the same answer.
    again = call_json_command("aggregate_labels", study.pk, "--method", "mace")
    assert again == outputs["mace"] and again["seed"] == study.seed


def test_only_counted_judgments_enter_voided_and_excluded_annotators_stay_out():
    study = make_label_study(items=6, label_schema={"scale": "graded-0-2"})
    people = [make_annotator(name) for name in ("ann", "bea", "cal", "spoil")]
    for item in study.items.all():
        for person, label in zip(people, (2, 2, 1, 0)):
            add_label_judgment(item, person, label)
    voided = Judgment.objects.filter(annotator=people[0]).first()
    voided.voided = True
    voided.save(update_fields=["voided"])
    block_annotator(study, people[3], by=make_user("boss", staff=True), reason="spoiler", exclude_judgments=True)
    output = call_json_command("aggregate_labels", study.pk, "--method", "dawid-skene")
    assert set(output["competence"]) == {"ann", "bea", "cal"}
    assert output["judgments"] == 6 * 3 - 1
    frame = stored_frame(study)
    assert len(frame) == 17 and keyed(DawidSkene().fit(frame).labels_.to_dict()) == output["labels"]


def test_a_multi_select_item_aggregates_paragraph_by_paragraph_into_the_selected_positions():
    study = make_speech_quotability_study(multi_select=True)
    item = study.items.get()
    positions = list(item.candidates.values_list("position", flat=True))
    selections = {"ann": [0, 1], "bea": [0, 1], "cal": [0], "dan": [1, 2], "eve": [0, 1]}
    for name, chosen in selections.items():
        add_label_judgment(item, make_annotator(name), selections=chosen)
    output = call_json_command("aggregate_labels", study.pk, "--method", "glad")
    assert output["unit"] == "paragraph" and output["labels"] == {str(item.pk): [0, 1]}
    triples = [
        (name, f"{item.pk}:{position}", int(position in chosen))
        for name, chosen in selections.items()
        for position in positions
    ]
    expected = aggregate(triples, "glad", values=[0, 1])
    posterior = output["posteriors"][str(item.pk)]
    assert posterior == {str(p): pytest.approx(expected.posteriors[f"{item.pk}:{p}"][1]) for p in positions}


def test_the_soft_label_export_keeps_every_items_distribution():
    study = make_label_study(items=5, label_schema={"scale": "graded-0-2"})
    people = [make_annotator(name) for name in ("ann", "bea", "cal")]
    for item, labels in zip(study.items.order_by("position"), ([2, 2, 1], [0, 1, 0], [1, 1, 2], [0, 0, 0], [2, 0, 1])):
        for person, label in zip(people, labels):
            add_label_judgment(item, person, label)
    summary = call_json_command("aggregate_labels", study.pk, "--method", "dawid-skene")
    out = io.StringIO()
    call_command("aggregate_labels", study.pk, "--method", "dawid-skene", "--soft", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [row["item"] for row in rows] == list(study.items.order_by("position").values_list("pk", flat=True))
    for row in rows:
        assert row["method"] == "dawid-skene" and row["judgments"] == 3
        assert row["posterior"] == summary["posteriors"][str(row["item"])]
        assert set(row["posterior"]) == {"0", "1", "2"} and sum(row["posterior"].values()) == pytest.approx(1.0)
        assert row["label"] == summary["labels"][str(row["item"])]
        assert row["passage"] and row["query"]


def test_bad_input_is_one_line_and_a_non_zero_exit():
    with pytest.raises(CommandError, match="field 'study': no study with id 999999"):
        call_command("aggregate_labels", "999999", "--method", "glad")
    with pytest.raises(CommandError, match="invalid choice: 'wawa'"):
        call_command("aggregate_labels", "1", "--method", "wawa")
